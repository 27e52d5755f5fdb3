package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// A Driver opens the stores of one URL scheme. Backends register theirs
// when they are imported (Register), as database/sql drivers do: a
// program links only the backends it imports.
type Driver interface {
	// Check validates a URL of the driver's scheme without opening or
	// creating anything.
	Check(url string) error
	// Open opens the store the URL names.
	Open(ctx context.Context, url string, o OpenOptions) (*Engine, error)
}

// OpenOptions tune Open.
type OpenOptions struct {
	// Store configures the engine (snapshots, compression, cache).
	Store Options
	// ReadOnly opens an existing store for reading only: nothing is
	// created (no directory, file or table) and nothing is written; a
	// missing store is ErrNotFound, another program's database ErrNotStore.
	// Writes through the store fail with ErrReadOnly.
	ReadOnly bool
	// Durability, when set, overrides the URL's (sqlite: "sync", "strict").
	Durability string
	// NoMigrate makes a read-write open refuse a store whose layout is
	// older than this code's, or a database without one, with
	// ErrMigrationNeeded instead of migrating it (the default).
	NoMigrate bool
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

// Scheme returns a URL's scheme: the text before the first ':'.
func Scheme(url string) string {
	s, _, _ := strings.Cut(url, ":")
	return s
}

// driverOf finds the driver of a URL's scheme.
func driverOf(url string) (Driver, error) {
	scheme, _, ok := strings.Cut(url, ":")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("%w: store URL %q needs a scheme (%s)", ErrInvalidArgument, url, strings.Join(Schemes(), ", "))
	}
	drivers.RLock()
	d := drivers.m[scheme]
	drivers.RUnlock()
	if d == nil {
		return nil, fmt.Errorf("%w: store URL %q: unknown scheme %q (registered: %s)", ErrInvalidArgument, url, scheme, strings.Join(Schemes(), ", "))
	}
	return d, nil
}

// CheckURL validates a store URL without opening anything: a registered
// scheme, and a URL that scheme's driver accepts.
func CheckURL(url string) error {
	d, err := driverOf(url)
	if err != nil {
		return err
	}
	return d.Check(url)
}

// Open opens the store a URL names, through the driver registered for its
// scheme:
//
//	inmem:                                    (import store/inmem; memory: too)
//	sqlite:PATH[?durability=strict]           (import store/sqlite)
//	postgres://user@host:5432/db[?search_path=schema]  (import store/postgres)
func Open(ctx context.Context, url string, o OpenOptions) (*Engine, error) {
	d, err := driverOf(url)
	if err != nil {
		return nil, err
	}
	if err := d.Check(url); err != nil {
		return nil, err
	}
	return d.Open(ctx, url, o)
}
