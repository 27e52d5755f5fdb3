package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	sqlite3 "modernc.org/sqlite/lib"
)

// DefaultWALPages is the WAL size at which a store checkpoints it by
// default: 512 pages of 4 KiB (2 MiB; SQLite's own default is 1000). The
// copy runs in the background; the writer waits only for the frames
// committed during it, once per copy, and each copy syncs the WAL and the
// database: fewer, larger copies cost less per step (W1 at S = 3000: about
// 20% less than 128 pages), for a WAL file of up to about 2 MiB while the
// store is open.
const DefaultWALPages = 512

// Durability says when a commit is safe.
type Durability string

// Durability modes.
const (
	// DurabilitySync: WAL with synchronous=NORMAL; survives process crashes.
	DurabilitySync Durability = "sync"
	// DurabilityStrict: synchronous=FULL; survives power loss.
	DurabilityStrict Durability = "strict"
)

// ParseDurability checks a durability name ("" is sync).
func ParseDurability(s string) (Durability, error) {
	switch Durability(s) {
	case "", DurabilitySync:
		return DurabilitySync, nil
	case DurabilityStrict:
		return DurabilityStrict, nil
	}
	return "", fmt.Errorf("%w: durability %q (want sync or strict)", store.ErrInvalidArgument, s)
}

// Options configure a SQLite backend.
type Options struct {
	Durability Durability
	// ReadConns is the size of the read pool (default 4).
	ReadConns int
	// BusyTimeout is how long a connection waits for another process's lock
	// (default 10s).
	BusyTimeout time.Duration
	// MaxBatch caps the commits grouped into one transaction (default 256).
	MaxBatch int
	// WALPages is the WAL size, in 4 KiB pages, at which a background
	// connection copies it into the database, after which the writer
	// restarts it; the WAL file is truncated to that size when it restarts
	// (default DefaultWALPages).
	WALPages int
	// ReadOnly opens an existing store for reading only: it never creates a
	// directory, a file or a table, and never writes to the file. A missing
	// file is ErrNotFound ("no store at PATH"); a database that is not a
	// Cairn store is ErrNotStore. Writes fail with ErrReadOnly.
	ReadOnly bool
	// Logger receives migrations (info) and group-commit batches (debug).
	// Nil: no logging.
	Logger *slog.Logger
	// NoMigrate refuses a file whose layout is older than this code's, or
	// a new file, with store.ErrMigrationNeeded instead of migrating it
	// (creating nothing).
	NoMigrate bool
}

// Backend is a driver.Backend on one SQLite file.
type Backend struct {
	log   *slog.Logger
	path  string
	write *sql.DB   // nil when read-only
	conn  *sql.Conn // nil when read-only
	read  *sql.DB
	// readOnly: opened with Options.ReadOnly.
	readOnly bool
	// legacy: a version 1 file opened read-only; its rows have no
	// checksums, so they are computed as rows are read.
	legacy bool
	// noItems: a file of a format before 4 opened read-only; it has no
	// items table, so it holds no items.
	noItems bool
	// noLanes: a file of a format before 5 opened read-only; its
	// checkpoint rows are keyed by (thread, ns, seq).
	noLanes bool
	// noIndex: a file of a format before 6 opened read-only; it has no
	// thread index, so listings other than by id are refused.
	noIndex bool
	// noExtIDs: a file of a format before 8 opened read-only; its rows
	// have no external ids (externalid.go).
	noExtIDs bool

	// Group commit: callers queue jobs; one of them at a time leads,
	// running everything queued as one transaction on conn.
	wmu      sync.Mutex
	idle     *sync.Cond // signalled when nobody leads
	queue    []*job
	leading  bool
	closed   bool
	maxBatch int

	begin, commit, rollback                                    *sql.Stmt
	insertRow, insertSnap, ensureThread, ensureLane, attachRow *sql.Stmt
	ix                                                         indexStmts

	stmts sync.Map // query text → *sql.Stmt on the read pool

	stats Stats // guarded by wmu

	// Background checkpoints: the writer counts the pages it wrote since
	// its last nudge (walPages, guarded by wmu) against walLimit.
	ckpt     *walCopier
	walPages int
	walLimit int
}

// setDefaults fills the options left at zero.
func (o *Options) setDefaults() {
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 10 * time.Second
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.WALPages <= 0 {
		o.WALPages = DefaultWALPages
	}
}

// Open opens the database at path, creating the file, its directory and
// the tables when needed (with opts.ReadOnly: see Options.ReadOnly).
// Several processes may open a new store at once: the tables are created in
// one transaction, and each waits for the others (BusyTimeout). ctx bounds
// the opening (its migrations included), not the backend's life.
func Open(ctx context.Context, path string, opts Options) (*Backend, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: empty database path", store.ErrInvalidArgument)
	}
	dur, err := ParseDurability(string(opts.Durability))
	if err != nil {
		return nil, err
	}
	opts.setDefaults()
	if opts.ReadOnly {
		return openReadOnly(ctx, path, opts)
	}
	if _, err := os.Stat(path); opts.NoMigrate && errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no store at %s: cairn migrate up creates it", store.ErrMigrationNeeded, path)
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("store: create directory for %s: %w", path, err)
		}
	}
	syncMode := "NORMAL"
	if dur == DurabilityStrict {
		syncMode = "FULL"
	}
	base := FileURI(path)
	busy := fmt.Sprintf("_pragma=busy_timeout(%d)", opts.BusyTimeout.Milliseconds())
	common := fmt.Sprintf("%s&_pragma=synchronous(%s)", busy, syncMode)
	// The writer never checkpoints: the walCopier does, in the
	// background.
	walOpts := fmt.Sprintf("&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(%d)", opts.WALPages*4096)
	w, err := sql.Open("sqlite", base+"?"+common+walOpts)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxLifetime(0)
	b := &Backend{path: path, write: w, maxBatch: opts.MaxBatch, log: opts.Logger, walLimit: opts.WALPages}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.idle = sync.NewCond(&b.wmu)
	fail := func(err error) (*Backend, error) {
		if b.read != nil {
			b.read.Close()
		}
		if b.conn != nil {
			b.conn.Close()
		}
		w.Close()
		return nil, err
	}
	if b.conn, err = w.Conn(ctx); err != nil {
		return fail(b.wrapOpen(err))
	}
	if err := b.migrate(ctx, opts.BusyTimeout, opts.NoMigrate); err != nil {
		return fail(err)
	}
	if b.read, err = sql.Open("sqlite", base+"?"+common+"&_pragma=query_only(1)"); err != nil {
		return fail(fmt.Errorf("store: open %s: %w", path, err))
	}
	b.read.SetMaxOpenConns(opts.ReadConns)
	b.read.SetMaxIdleConns(opts.ReadConns)
	// Open one reader and prepare the common reads now, so the first load
	// does not pay for them.
	if err := b.prepareReads(ctx); err != nil {
		return fail(b.wrapOpen(err))
	}
	if err := b.prepareWrites(ctx); err != nil {
		return fail(b.wrapOpen(err))
	}
	if err := b.startWALCopies(base + "?" + common); err != nil {
		return fail(err)
	}
	return b, nil
}

// FileURI is the file: URI SQLite opens a path by (with the driver's
// "?_pragma=…" options appended): relative paths stay relative to the
// working directory, and characters URIs reserve are escaped.
func FileURI(path string) string { return "file:" + (&url.URL{Path: path}).EscapedPath() }

func (b *Backend) prepareWrites(ctx context.Context) error {
	for _, p := range []struct {
		st  **sql.Stmt
		sql string
	}{
		{&b.begin, `BEGIN IMMEDIATE`},
		{&b.commit, `COMMIT`},
		{&b.rollback, `ROLLBACK`},
		// The parent must exist: a writer whose idea of the thread is stale
		// (the thread was deleted and started again elsewhere) must not leave
		// a row that points at nothing, nor a writer whose idea of the
		// parent is older than a prune that rebased it (driver.BaseFits: the
		// row's base must be the parent's, the parent, or the row itself).
		// Without its parent the row's patch
		// is NULL, which the NOT NULL column refuses (insert reports it as
		// ErrConflict): one plain INSERT, cheaper than an INSERT … SELECT …
		// WHERE EXISTS, which SQLite runs through a temporary table. The
		// lane is looked up in the statement, never remembered: another
		// process may delete the thread and start it again in a new lane.
		// Without a lane the key is negative, which the table's CHECK
		// refuses (a NULL key would be given a rowid). Parameters are
		// named only where used twice: the driver copies each name.
		{&b.insertRow, `INSERT INTO checkpoints (id, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch, crc, ext_id)
			VALUES (` + laneKey("?", "?") + ` + ?, ?, ?, ?, ?, ?, ?, ?, ?,
				CASE WHEN ?4 = 0 OR EXISTS (SELECT 1 FROM checkpoints WHERE id = ` + laneKey("?1", "?2") + ` + ?4
					AND (base = ?5 OR ?5 IN (?3, ?4))) THEN ? END, ?, ?)`},
		{&b.ensureLane, `INSERT OR IGNORE INTO lanes (thread, ns) VALUES (?, ?)`},
		{&b.insertSnap, `INSERT OR REPLACE INTO snapshots (thread, ns, seq, data) VALUES (?,?,?,?)`},
		{&b.ensureThread, `INSERT OR IGNORE INTO threads (id, tenant, metadata, created_at, crc, touched_at) VALUES (?1,?2,?3,?4,?5,?4)`},
		{&b.attachRow, `UPDATE checkpoints SET has_snapshot = 1, base = ?1, since = ?2, base_size = ?3, crc = ?4
			WHERE id = ` + laneKey("?5", "?6") + ` + ?7 AND crc = ?8`},
	} {
		var err error
		if *p.st, err = b.conn.PrepareContext(ctx, p.sql); err != nil {
			return err
		}
	}
	return b.prepareIndex(ctx)
}

// openReadOnly opens an existing Cairn store without writing anything.
func openReadOnly(ctx context.Context, path string, opts Options) (*Backend, error) {
	b, v, err := openFormat(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	if v == 0 {
		err = fmt.Errorf("%w: %s has no Cairn format version (an empty database, or one a crash left half-created: cairn migrate up finishes creating it)", store.ErrNotStore, path)
	} else {
		b.legacy = v == 1
		b.noItems = v < 4
		b.noLanes = v < 5
		b.noIndex = v < 6
		b.noExtIDs = v < 8
		err = b.prepareReads(ctx)
	}
	if err != nil {
		b.read.Close()
		return nil, b.wrapReadOnly(err)
	}
	return b, nil
}

// openFormat opens an existing file read-only and reads its format
// version (checkFormat): 0 for an empty database or one with only some of
// Cairn's tables.
func openFormat(ctx context.Context, path string, opts Options) (*Backend, int, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, 0, fmt.Errorf("%w: no store at %s", store.ErrNotFound, path)
	case err != nil:
		return nil, 0, fmt.Errorf("store: open %s: %w", path, err)
	case fi.IsDir():
		return nil, 0, fmt.Errorf("%w: %s is a directory, not a store", store.ErrNotStore, path)
	}
	dsn := fmt.Sprintf("%s?mode=ro&_pragma=busy_timeout(%d)&_pragma=query_only(1)", FileURI(path), opts.BusyTimeout.Milliseconds())
	r, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, 0, fmt.Errorf("store: open %s: %w", path, err)
	}
	r.SetMaxOpenConns(opts.ReadConns)
	r.SetMaxIdleConns(opts.ReadConns)
	b := &Backend{path: path, read: r, readOnly: true, closed: false}
	b.idle = sync.NewCond(&b.wmu)
	conn, err := r.Conn(ctx)
	if err == nil {
		var v int
		v, err = b.checkFormat(ctx, conn)
		conn.Close()
		if err == nil {
			return b, v, nil
		}
	}
	r.Close()
	return nil, 0, b.wrapReadOnly(err)
}

// wrapReadOnly is wrapOpen for a read-only open, which cannot roll back
// what a crash left unfinished: SQLite says so with READONLY_ROLLBACK (a
// hot rollback journal, as a kill while the first writer creates the
// tables leaves) or READONLY_RECOVERY (a WAL index to rebuild).
func (b *Backend) wrapReadOnly(err error) error {
	switch sqliteCode(err) {
	case sqlite3.SQLITE_READONLY_ROLLBACK, sqlite3.SQLITE_READONLY_RECOVERY:
		return fmt.Errorf("%w: %s holds a write a crash left unfinished, which only a read-write open rolls back: run cairn migrate up (or cairn resume THREAD) once", store.ErrRecoveryNeeded, b.path)
	}
	return b.wrapOpen(err)
}

// OpenStore opens a store on the database at path (see Open).
func OpenStore(ctx context.Context, path string, opts Options, sopts store.Options) (*store.Engine, error) {
	b, err := Open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	return store.New(b, sopts), nil
}

// Path returns the database file path.
func (b *Backend) Path() string { return b.path }

// ReadOnly reports whether the backend was opened read-only (an engine
// over it then writes no late snapshots).
func (b *Backend) ReadOnly() bool { return b.readOnly }

// Close waits for queued commits, then closes the database. The WAL is
// checkpointed and truncated so the file is self-contained.
func (b *Backend) Close() error {
	b.wmu.Lock()
	if b.closed {
		b.wmu.Unlock()
		return nil
	}
	b.closed = true
	for b.leading {
		b.idle.Wait()
	}
	b.wmu.Unlock()
	b.stmts.Range(func(_, v any) bool { v.(*sql.Stmt).Close(); return true })
	if b.readOnly {
		return b.read.Close()
	}
	for _, st := range append([]*sql.Stmt{b.begin, b.commit, b.rollback, b.insertRow, b.insertSnap, b.ensureThread, b.ensureLane, b.attachRow}, b.ix.all()...) {
		st.Close()
	}
	var ckErr error
	if b.ckpt != nil {
		ckErr = b.ckpt.close()
	}
	_, _ = b.conn.ExecContext(context.Background(), `PRAGMA wal_checkpoint(TRUNCATE)`)
	errs := []error{ckErr, b.read.Close(), b.conn.Close(), b.write.Close()}
	return errors.Join(errs...)
}

// Sizes reports the bytes of the database file and of its WAL.
func (b *Backend) Sizes() (db, wal int64) {
	if fi, err := os.Stat(b.path); err == nil {
		db = fi.Size()
	}
	if fi, err := os.Stat(b.path + "-wal"); err == nil {
		wal = fi.Size()
	}
	return db, wal
}

var _ driver.Backend = (*Backend)(nil)
