package postgres

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options configure the backend.
type Options struct {
	// MaxConns caps the pool (default: pgxpool's).
	MaxConns int32
	// ReadOnly opens an existing store for reading only: no table is
	// created or changed. A database without Cairn's tables is
	// ErrNotStore; a store of an older format ErrMigrationNeeded; writes
	// fail with ErrReadOnly.
	ReadOnly bool
	// NoMigrate refuses a database whose layout is older than this code's,
	// or one without a Cairn store, with store.ErrMigrationNeeded instead
	// of migrating it.
	NoMigrate bool
	// Logger receives migrations (info) and group commits (debug). Nil:
	// no logging.
	Logger *slog.Logger
	// GroupCommit caps the appends one transaction commits together
	// (default 128; 1 or less with NoGroupCommit: each append its own
	// transaction).
	GroupCommit int
	// NoGroupCommit commits each append in its own transaction.
	NoGroupCommit bool
	// CommitLanes is how many group transactions may be in flight at once
	// (default 2; the pool must leave connections for reads).
	CommitLanes int
}

// Backend is a driver.Backend on PostgreSQL.
type Backend struct {
	pool     *pgxpool.Pool
	readOnly bool
	group    *grouper // nil: each append its own transaction
}

// Open connects to dsn (a postgres:// URL or key=value string; pgx passes
// unknown parameters such as search_path to the server) and creates the
// tables if needed.
func Open(ctx context.Context, dsn string, opts Options) (*Backend, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres DSN: %v", store.ErrInvalidArgument, err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: %w", err)
	}
	b := &Backend{pool: pool, readOnly: opts.ReadOnly}
	if !opts.NoGroupCommit && opts.GroupCommit != 1 {
		log := opts.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		b.group = &grouper{b: b, maxBatch: cmp.Or(opts.GroupCommit, 128), lanes: cmp.Or(opts.CommitLanes, 2), log: log}
	}
	if opts.ReadOnly {
		err = b.checkReadOnly(ctx)
	} else {
		err = b.migrate(ctx, opts.NoMigrate, opts.Logger)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return b, nil
}

// checkReadOnly checks, without writing, that the database holds a Cairn
// store of a version this code reads.
func (b *Backend) checkReadOnly(ctx context.Context) error {
	var format bool
	if err := b.pool.QueryRow(ctx, `SELECT to_regclass('cairn_format') IS NOT NULL`).Scan(&format); err != nil {
		return fmt.Errorf("store: postgres: %w", err)
	}
	if !format {
		return fmt.Errorf("%w: the database (search path) has no cairn_format table", store.ErrNotStore)
	}
	var v int
	if err := b.pool.QueryRow(ctx, `SELECT version FROM cairn_format WHERE id = 1`).Scan(&v); err != nil {
		return fmt.Errorf("%w: cairn_format has no version: %v", store.ErrNotStore, err)
	}
	if v > formatVersion {
		return fmt.Errorf("%w: the database has format %d, this Cairn reads up to %d", store.ErrUnsupportedFormat, v, formatVersion)
	}
	if v < formatVersion {
		// Older layouts name their tables otherwise; reading them would
		// mean migrating, which a read-only open never does.
		return fmt.Errorf("%w: the store has format %d, this Cairn reads %d: run cairn migrate up (or any command that writes)", store.ErrMigrationNeeded, v, formatVersion)
	}
	for _, t := range tables {
		var ok bool
		if err := b.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, t).Scan(&ok); err != nil {
			return fmt.Errorf("store: postgres: %w", err)
		}
		if !ok {
			return fmt.Errorf("%w: table %q is missing: the store is damaged or not a Cairn store", store.ErrCorrupt, t)
		}
	}
	return nil
}

func (b *Backend) writable() error {
	if b.readOnly {
		return store.ErrReadOnly
	}
	return nil
}

// OpenStore opens a store on PostgreSQL.
func OpenStore(ctx context.Context, dsn string, opts Options, sopts store.Options) (*store.Engine, error) {
	b, err := Open(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	return store.New(b, sopts), nil
}

// ReadOnly reports whether the backend was opened read-only (an engine
// over it then writes no late snapshots).
func (b *Backend) ReadOnly() bool { return b.readOnly }

// Close implements driver.Backend.
func (b *Backend) Close() error {
	b.pool.Close()
	return nil
}

var _ driver.Backend = (*Backend)(nil)
