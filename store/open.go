package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/store/driver"
)

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

// Schemes lists the URL schemes of the backends the program imports
// (their drivers registered them), sorted.
func Schemes() []string { return driver.Schemes() }

// Scheme returns a URL's scheme: the text before the first ':'.
func Scheme(url string) string {
	s, _, _ := strings.Cut(url, ":")
	return s
}

// driverOf finds the driver of a URL's scheme.
func driverOf(url string) (driver.Driver, error) {
	scheme, _, ok := strings.Cut(url, ":")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("%w: store URL %q needs a scheme (%s)", ErrInvalidArgument, url, strings.Join(Schemes(), ", "))
	}
	d := driver.Lookup(scheme)
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
	b, err := d.Open(ctx, url, driver.OpenOptions{ReadOnly: o.ReadOnly, Durability: o.Durability, NoMigrate: o.NoMigrate, Logger: o.Store.Logger})
	if err != nil {
		return nil, err
	}
	return New(b, o.Store), nil
}
