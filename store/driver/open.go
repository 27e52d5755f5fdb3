package driver

import (
	"context"
	"log/slog"
	"slices"
	"sync"
)

// A Driver opens the stores of one URL scheme. Backends register theirs
// when they are imported (Register), as database/sql drivers do: a
// program links only the backends it imports.
type Driver interface {
	// Check validates a URL of the driver's scheme without opening or
	// creating anything.
	Check(url string) error
	// Open opens the backend of the store the URL names; store.Open puts
	// the engine on it.
	Open(ctx context.Context, url string, o OpenOptions) (Backend, error)
}

// OpenOptions are what store.Open passes a Driver (store.OpenOptions
// without the engine's options).
type OpenOptions struct {
	// ReadOnly opens an existing store for reading only: nothing is
	// created (no directory, file or table) and nothing is written; a
	// missing store is ErrNotFound, another program's database ErrNotStore.
	// Writes fail with ErrReadOnly.
	ReadOnly bool
	// Durability, when set, overrides the URL's (sqlite: "sync", "strict").
	Durability string
	// NoMigrate makes a read-write open refuse a store whose layout is
	// older than the driver's, or a database without one, with
	// ErrMigrationNeeded instead of migrating it.
	NoMigrate bool
	// Logger receives the backend's logs (migrations, commit batches);
	// nil discards them.
	Logger *slog.Logger
}

// drivers is the registry of URL schemes, filled by the backends' init
// functions and read-only afterwards (as database/sql's).
var drivers = struct {
	sync.RWMutex
	m map[string]Driver
}{m: map[string]Driver{}}

// Register makes a driver available under a URL scheme ("sqlite" for
// "sqlite:PATH", "postgres" for "postgres://…"). It panics if the scheme
// is registered twice or the driver is nil, as sql.Register does.
func Register(scheme string, d Driver) {
	drivers.Lock()
	defer drivers.Unlock()
	if d == nil {
		panic("store: Register driver is nil")
	}
	if _, dup := drivers.m[scheme]; dup {
		panic("store: Register called twice for scheme " + scheme)
	}
	drivers.m[scheme] = d
}

// Schemes lists the registered URL schemes, sorted.
func Schemes() []string {
	drivers.RLock()
	defer drivers.RUnlock()
	out := make([]string, 0, len(drivers.m))
	for s := range drivers.m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Lookup returns the driver registered for a URL scheme, nil when none is.
func Lookup(scheme string) Driver {
	drivers.RLock()
	defer drivers.RUnlock()
	return drivers.m[scheme]
}
