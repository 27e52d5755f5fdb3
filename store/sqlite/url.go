package sqlite

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

func init() { driver.Register("sqlite", urlDriver{}) }

// DefaultURL is the store the CLI and the examples use when none is given:
// a SQLite file in .cairn/ under the working directory.
const DefaultURL = "sqlite:.cairn/state.db"

// urlDriver opens "sqlite:PATH[?durability=sync|strict]" URLs (store.Open).
type urlDriver struct{}

func (urlDriver) Check(raw string) error {
	_, _, err := ParseURL(raw)
	return err
}

func (urlDriver) Open(ctx context.Context, raw string, o driver.OpenOptions) (driver.Backend, error) {
	path, dur, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	if o.Durability != "" {
		if dur, err = ParseDurability(o.Durability); err != nil {
			return nil, err
		}
	}
	b, err := Open(ctx, path, Options{Durability: dur, ReadOnly: o.ReadOnly, NoMigrate: o.NoMigrate, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// ParseURL reads a "sqlite:PATH[?durability=sync|strict]" store URL: the
// file's path (relative paths are relative to the working directory) and
// the durability it names ("" when none).
func ParseURL(raw string) (path string, d Durability, err error) {
	rest, ok := strings.CutPrefix(raw, "sqlite:")
	if !ok {
		return "", "", fmt.Errorf("%w: store URL %q is not a sqlite: URL", store.ErrInvalidArgument, raw)
	}
	path, query, _ := strings.Cut(rest, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", "", fmt.Errorf("%w: store URL %q: %v", store.ErrInvalidArgument, raw, err)
	}
	for k, v := range q {
		if k != "durability" {
			return "", "", fmt.Errorf("%w: store URL %q: unknown option %q", store.ErrInvalidArgument, raw, k)
		}
		if d, err = ParseDurability(v[len(v)-1]); err != nil {
			return "", "", fmt.Errorf("store URL %q: %w", raw, err)
		}
	}
	path = strings.TrimPrefix(path, "//")
	if path == "" {
		return "", "", fmt.Errorf("%w: store URL %q needs a file path, e.g. sqlite:.cairn/state.db", store.ErrInvalidArgument, raw)
	}
	return path, d, nil
}

// Migrations lists the migrations and the baseline (driver.MigratingDriver).
func (urlDriver) Migrations() ([]store.Migration, string) { return migrations, newStoreSQL() }

// Version reads the format version of the file a URL names, opening it
// read-only (driver.MigratingDriver): 0 for an empty database, or one a crash
// left half-created, which a read-write open finishes creating.
func (urlDriver) Version(ctx context.Context, raw string) (int, error) {
	path, _, err := ParseURL(raw)
	if err != nil {
		return 0, err
	}
	opts := Options{ReadOnly: true}
	opts.setDefaults()
	b, v, err := openFormat(ctx, path, opts)
	if err != nil {
		return 0, err
	}
	return v, b.Close()
}
