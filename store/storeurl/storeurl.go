package storeurl

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/memory"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// Default is the store URL used when none is given.
const Default = "sqlite:.cairn/state.db"

// Spec is a parsed store URL.
type Spec struct {
	Scheme     string // "memory", "sqlite" or "postgres"
	Path       string // sqlite file
	DSN        string // postgres connection URL
	Durability sqlite.Durability
}

// Parse checks a store URL.
func Parse(raw string) (Spec, error) {
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok {
		return Spec{}, fmt.Errorf("%w: store URL %q needs a scheme (memory:, sqlite:PATH or postgres://…)", store.ErrInvalidArgument, raw)
	}
	if scheme == "postgres" || scheme == "postgresql" {
		if !strings.HasPrefix(rest, "//") {
			return Spec{}, fmt.Errorf("%w: store URL %q: want postgres://user@host:port/database", store.ErrInvalidArgument, raw)
		}
		return Spec{Scheme: "postgres", DSN: raw}, nil
	}
	path, query, _ := strings.Cut(rest, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return Spec{}, fmt.Errorf("%w: store URL %q: %v", store.ErrInvalidArgument, raw, err)
	}
	spec := Spec{Scheme: scheme}
	for k, v := range q {
		switch {
		case k == "durability" && scheme == "sqlite":
			d, err := sqlite.ParseDurability(v[len(v)-1])
			if err != nil {
				return Spec{}, fmt.Errorf("store URL %q: %w", raw, err)
			}
			spec.Durability = d
		default:
			return Spec{}, fmt.Errorf("%w: store URL %q: unknown option %q", store.ErrInvalidArgument, raw, k)
		}
	}
	switch scheme {
	case "memory":
		if path != "" {
			return Spec{}, fmt.Errorf("%w: store URL %q: memory takes no path", store.ErrInvalidArgument, raw)
		}
	case "sqlite":
		path = strings.TrimPrefix(path, "//")
		if path == "" {
			return Spec{}, fmt.Errorf("%w: store URL %q needs a file path, e.g. sqlite:.cairn/state.db", store.ErrInvalidArgument, raw)
		}
		spec.Path = path
	default:
		return Spec{}, fmt.Errorf("%w: store URL %q: unknown scheme %q (memory, sqlite, postgres)", store.ErrInvalidArgument, raw, scheme)
	}
	return spec, nil
}

// Open opens the store a URL names. A durability given in opts overrides the
// URL's.
func Open(raw string, opts store.Options, durability sqlite.Durability) (*store.Engine, error) {
	spec, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if durability != "" {
		spec.Durability = durability
	}
	switch spec.Scheme {
	case "memory":
		return memory.Open(opts), nil
	case "postgres":
		return postgres.OpenStore(context.Background(), spec.DSN, postgres.Options{}, opts)
	default:
		return sqlite.OpenStore(spec.Path, sqlite.Options{Durability: spec.Durability}, opts)
	}
}

// OpenReadOnly opens, for reading only, the existing store a URL names. It
// never creates a directory, a file or a table and never writes:
//
//   - sqlite:PATH with no file at PATH fails with store.ErrNotFound
//     ("no store at PATH");
//   - a file or database that is not a Cairn store (another program's
//     SQLite file, a Postgres schema without Cairn's tables) fails with
//     store.ErrNotStore and is left exactly as it was;
//   - a damaged file fails with store.ErrCorrupt naming it.
//
// Writes through the returned store fail with store.ErrReadOnly. memory:
// gives an empty store. Read commands (state, history, threads,
// namespaces, export) use it so that a typo in --store never creates a
// store.
func OpenReadOnly(raw string, opts store.Options) (*store.Engine, error) {
	spec, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	switch spec.Scheme {
	case "memory":
		return memory.Open(opts), nil
	case "postgres":
		return postgres.OpenStore(context.Background(), spec.DSN, postgres.Options{ReadOnly: true}, opts)
	default:
		return sqlite.OpenStore(spec.Path, sqlite.Options{ReadOnly: true}, opts)
	}
}
