package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func init() {
	driver.Register("postgres", urlDriver{})
	driver.Register("postgresql", urlDriver{})
}

// urlDriver opens "postgres://user@host:port/db[?search_path=schema]" URLs
// (store.Open); the URL is handed to pgx as it is.
type urlDriver struct{}

func (urlDriver) Check(raw string) error {
	_, rest, _ := strings.Cut(raw, ":")
	if !strings.HasPrefix(rest, "//") {
		return fmt.Errorf("%w: store URL %q: want postgres://user@host:port/database", store.ErrInvalidArgument, raw)
	}
	return nil
}

func (urlDriver) Open(ctx context.Context, raw string, o driver.OpenOptions) (driver.Backend, error) {
	b, err := Open(ctx, raw, Options{ReadOnly: o.ReadOnly, NoMigrate: o.NoMigrate, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Migrations lists the migrations and the baseline (driver.MigratingDriver).
func (urlDriver) Migrations() ([]store.Migration, string) { return migrations, baseline }

// Version reads the format version of the store in the database (and
// search path) a URL names, changing nothing: 0 when there is none
// (driver.MigratingDriver).
func (urlDriver) Version(ctx context.Context, raw string) (int, error) {
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		return 0, fmt.Errorf("%w: postgres DSN: %v", store.ErrInvalidArgument, err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, fmt.Errorf("store: postgres: %w", err)
	}
	defer pool.Close()
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, fmt.Errorf("store: postgres: %w", err)
	}
	defer tx.Rollback(ctx)
	v, err := formatOf(ctx, tx)
	if err != nil {
		return 0, fmt.Errorf("store: postgres: %w", err)
	}
	return v, nil
}
