package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/store"
	sqlite "modernc.org/sqlite"
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

// The layout: numbered migrations (migrations/NNNN_name.sql, each
// perhaps followed by a Go step) and the baseline a new store is made
// from (schema.sql, the same layout at once). The store's format version
// (PRAGMA user_version) is the number of its last migration. Version 2
// adds a checksum (crc) to every thread and checkpoint row; version 3 the
// HTTP server's runs and their event logs; version 4 the long-term memory
// store's items and their full-text index; version 5 keys checkpoint rows
// by lane (a thread namespace's number) and seq in one integer; version
// 6 adds the thread index (threadindex.go); version 7 keeps each tenant's
// thread under its key, tenant/id (tenantkeys.go).
var (
	//go:embed migrations/*.sql
	migrationFiles embed.FS
	//go:embed schema.sql
	baseline string

	migrations = store.MustLoadMigrations(migrationFiles, "migrations", map[int]string{
		2: "computes the checksum of every thread and checkpoint row",
		5: "checks that every seq fits in 32 bits, before the rows are copied",
		6: "fills the thread index: each thread's status and touch time from its head, its metadata entries, the counters",
		7: "refuses a thread whose key another thread has, before the rows are renamed; gives each renamed thread and checkpoint row the checksum of its new name",
	})
	// schemaVersion is the format this code writes.
	schemaVersion = store.Latest(migrations)
)

// tables are the tables of a Cairn store; runTables those format 3 adds;
// itemTables those format 4 adds (item_text and the tables FTS5 keeps
// its index in); laneTables those format 5 adds.
var (
	tables     = []string{"threads", "checkpoints", "snapshots", "writes"}
	laneTables = []string{"lanes"}
	runTables  = []string{"runs", "run_events", "api_keys", "leases"}
	itemTables = []string{"items", "item_text", "item_text_data", "item_text_idx", "item_text_docsize", "item_text_config"}
)

// Backend is a store.Backend on one SQLite file.
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

// Stats counts the writer's work.
type Stats struct {
	// Jobs is the number of writes (appends, thread changes) committed or
	// refused; Transactions the number of transactions they ran in.
	Jobs, Transactions int64
	// WAL counts the background copies of the WAL into the database
	// (SQLite's WAL checkpoints; not Cairn's checkpoints).
	WAL WALStats
}

// Stats returns the writer's counters.
func (b *Backend) Stats() Stats {
	b.wmu.Lock()
	st := b.stats
	b.wmu.Unlock()
	if b.ckpt != nil {
		st.WAL = b.ckpt.snapshot()
	}
	return st
}

// query runs a read through a statement prepared once per query text (the
// texts are a small fixed set built from flags, never from values).
func (b *Backend) query(ctx context.Context, text string, args ...any) (*sql.Rows, error) {
	st, ok := b.stmts.Load(text)
	if !ok {
		if err := b.prepare(ctx, text); err != nil {
			return nil, err
		}
		st, _ = b.stmts.Load(text)
	}
	return st.(*sql.Stmt).QueryContext(ctx, args...)
}

func (b *Backend) prepare(ctx context.Context, text string) error {
	if _, ok := b.stmts.Load(text); ok {
		return nil
	}
	prepared, err := b.read.PrepareContext(ctx, text)
	if err != nil {
		return err
	}
	if _, loaded := b.stmts.LoadOrStore(text, prepared); loaded {
		prepared.Close()
	}
	return nil
}

// job is one unit of work for the writer. Its fn runs inside the batch
// transaction; expected failures (a conflict) leave the others committed.
type job struct {
	ctx   context.Context
	fn    func(ctx context.Context, tx *sql.Conn) error
	done  chan error
	pages int // the WAL pages it is expected to write
}

// errLead is sent to a queued job's owner to make it the next leader.
var errLead = errors.New("lead")

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
// one transaction, and each waits for the others (BusyTimeout).
func Open(path string, opts Options) (*Backend, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: empty database path", store.ErrInvalidArgument)
	}
	dur, err := ParseDurability(string(opts.Durability))
	if err != nil {
		return nil, err
	}
	opts.setDefaults()
	if opts.ReadOnly {
		return openReadOnly(path, opts)
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
	ctx := context.Background()
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
		// parent is older than a prune that rebased it (store.BaseFits: the
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
		{&b.insertRow, `INSERT INTO checkpoints (id, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch, crc)
			VALUES (` + laneKey("?", "?") + ` + ?, ?, ?, ?, ?, ?, ?, ?, ?,
				CASE WHEN ?4 = 0 OR EXISTS (SELECT 1 FROM checkpoints WHERE id = ` + laneKey("?1", "?2") + ` + ?4
					AND (base = ?5 OR ?5 IN (?3, ?4))) THEN ? END, ?)`},
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
func openReadOnly(path string, opts Options) (*Backend, error) {
	ctx := context.Background()
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

// OpenStore opens a store on the database at path.
func OpenStore(path string, opts Options, sopts store.Options) (*store.Engine, error) {
	b, err := Open(path, opts)
	if err != nil {
		return nil, err
	}
	return store.New(b, sopts), nil
}

// Path returns the database file path.
func (b *Backend) Path() string { return b.path }

// checkFormat reads the format version and checks that the file is a Cairn
// store of a version this code reads: 0 is a database without Cairn tables
// (new), or one with only Cairn's tables that a crash left unversioned.
func (b *Backend) checkFormat(ctx context.Context, c *sql.Conn) (int, error) {
	var v int
	if err := c.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return 0, err
	}
	if v > schemaVersion {
		return 0, fmt.Errorf("%w: %s has format %d, this Cairn reads up to %d", store.ErrUnsupportedFormat, b.path, v, schemaVersion)
	}
	have, err := tableNames(ctx, c)
	if err != nil {
		return 0, err
	}
	if v == 0 {
		for name := range have {
			if !slices.Contains(tables, name) && !slices.Contains(runTables, name) && !slices.Contains(itemTables, name) && !slices.Contains(laneTables, name) && !slices.Contains(indexTables, name) {
				return 0, fmt.Errorf("%w: %s holds table %q, which is not Cairn's; refusing to add Cairn's tables to another program's database", store.ErrNotStore, b.path, name)
			}
		}
		return 0, nil
	}
	for _, name := range tables {
		if !have[name] {
			return 0, b.missingTable(name)
		}
	}
	for _, name := range runTables {
		if v >= 3 && !have[name] {
			return 0, b.missingTable(name)
		}
	}
	for _, name := range itemTables[:2] {
		if v >= 4 && !have[name] {
			return 0, b.missingTable(name)
		}
	}
	for _, name := range laneTables {
		if v >= 5 && !have[name] {
			return 0, b.missingTable(name)
		}
	}
	for _, name := range indexTables {
		if v >= 6 && !have[name] {
			return 0, b.missingTable(name)
		}
	}
	return v, nil
}

func (b *Backend) missingTable(name string) error {
	return fmt.Errorf("%w: %s has no table %q: the store is damaged or not a Cairn store", store.ErrCorrupt, b.path, name)
}

// tableNames lists the tables of the database (SQLite's own excluded).
func tableNames(ctx context.Context, c *sql.Conn) (map[string]bool, error) {
	rows, err := c.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		have[name] = true
	}
	return have, rows.Err()
}

// migrate brings the file to schemaVersion. The common case (current
// format) only reads. Otherwise the tables are created or upgraded in one
// IMMEDIATE transaction, so processes opening a new store at once wait for
// each other and the loser finds the work done.
func (b *Backend) migrate(ctx context.Context, busy time.Duration, noMigrate bool) error {
	// Look before changing anything: another program's file is refused as
	// it is.
	v, err := b.checkFormat(ctx, b.conn)
	if err != nil {
		return b.wrapOpen(err)
	}
	if noMigrate && v < schemaVersion {
		return fmt.Errorf("%w: %s has format %d, this Cairn writes %d: run cairn migrate up", store.ErrMigrationNeeded, b.path, v, schemaVersion)
	}
	if err := b.walMode(ctx, busy); err != nil {
		return b.wrapOpen(err)
	}
	if v == schemaVersion {
		return nil
	}
	if _, err := b.conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return b.wrapOpen(err)
	}
	err = b.upgrade(ctx)
	if err == nil {
		_, err = b.conn.ExecContext(ctx, `COMMIT`)
	}
	if err != nil {
		_, _ = b.conn.ExecContext(ctx, `ROLLBACK`)
		return b.wrapOpen(err)
	}
	b.log.Info("store migrated", "path", b.path, "from", v, "to", schemaVersion)
	return nil
}

// walMode switches the file to WAL. Changing the journal mode needs an
// exclusive lock, for which SQLite does not always call the busy handler,
// so a process that finds the file busy retries until busy has passed.
func (b *Backend) walMode(ctx context.Context, busy time.Duration) error {
	deadline := time.Now().Add(busy)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		var mode string
		err := b.conn.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
	}
}

// upgrade runs inside the migration transaction: it re-reads the version
// (another process may have done the work) and creates or upgrades tables.
func (b *Backend) upgrade(ctx context.Context) error {
	v, err := b.checkFormat(ctx, b.conn)
	if err != nil {
		return err
	}
	switch v {
	case schemaVersion:
		return nil
	case 0:
		if err := b.create(ctx); err != nil {
			return err
		}
	default:
		for _, m := range store.Pending(migrations, v) {
			if err := b.apply(ctx, m); err != nil {
				return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
			}
		}
	}
	_, err = b.conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion))
	return err
}

// create makes the tables of a file without a version. A crash of an
// older Cairn may have left version 1 tables without their version: they
// get their checksums and their lanes too.
func (b *Backend) create(ctx context.Context) error {
	old, err := b.laneless(ctx)
	if err != nil {
		return err
	}
	if old {
		// The baseline indexes the thread columns format 6 adds.
		if err := b.addThreadColumns(ctx); err != nil {
			return err
		}
	}
	if _, err := b.conn.ExecContext(ctx, baseline); err != nil {
		return err
	}
	if old {
		if err := b.addChecksums(ctx); err != nil {
			return err
		}
		if err := b.applyOnly(ctx, 5); err != nil {
			return err
		}
		if err := b.fillIndex(ctx); err != nil {
			return err
		}
		return b.applyOnly(ctx, 7)
	}
	return nil
}

// applyOnly applies the migration numbered v, alone.
func (b *Backend) applyOnly(ctx context.Context, v int) error {
	for _, m := range migrations {
		if m.Version == v {
			return b.apply(ctx, m)
		}
	}
	return fmt.Errorf("%w: this build has no migration %d", store.ErrUnsupportedFormat, v)
}

// laneless reports whether the file holds a checkpoints table of the
// formats before 5, keyed by (thread, ns, seq).
func (b *Backend) laneless(ctx context.Context) (bool, error) {
	var n int
	err := b.conn.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('checkpoints') WHERE name = 'thread'`).Scan(&n)
	return n > 0, err
}

// apply runs one migration and its Go step.
func (b *Backend) apply(ctx context.Context, m store.Migration) error {
	if err := b.beforeMigration(ctx, m.Version); err != nil {
		return err
	}
	if _, err := b.conn.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	switch m.Version {
	case 2:
		if err := b.sumThreads(ctx); err != nil {
			return err
		}
		return b.sumCheckpoints(ctx)
	case 6:
		return b.fillIndex(ctx)
	case 7:
		return b.sumKeyed(ctx)
	}
	return nil
}

// beforeMigration runs the Go step that checks a file before migration
// v changes it.
func (b *Backend) beforeMigration(ctx context.Context, v int) error {
	switch v {
	case 5:
		return b.checkSeqs(ctx)
	case 7:
		return b.checkTenantKeys(ctx)
	}
	return nil
}

func isBusy(err error) bool {
	switch sqliteCode(err) & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

func (b *Backend) wrapOpen(err error) error {
	if errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrNotStore) || errors.Is(err, store.ErrUnsupportedFormat) || errors.Is(err, store.ErrNotFound) {
		return err
	}
	if isCorrupt(err) {
		return fmt.Errorf("%w: %s is not a readable Cairn database: %v", store.ErrCorrupt, b.path, err)
	}
	if t := b.damage(err); t != nil {
		return t
	}
	return fmt.Errorf("store: open %s: %w", b.path, err)
}

func sqliteCode(err error) int {
	if err == nil {
		return 0 // errors.As would allocate its target
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// isCorrupt reports errors that mean the file is damaged: SQLite's corrupt
// and not-a-database codes, and a short read (the file was truncated).
func isCorrupt(err error) bool {
	code := sqliteCode(err)
	switch code & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return code == sqlite3.SQLITE_IOERR_SHORT_READ
}

func isConstraint(err error) bool { return sqliteCode(err)&0xff == sqlite3.SQLITE_CONSTRAINT }

// damage explains a generic SQLite error (SQLITE_ERROR, which is also what
// a dropped table gives) when one of the store's tables is missing; nil
// otherwise.
func (b *Backend) damage(err error) error {
	if sqliteCode(err)&0xff != sqlite3.SQLITE_ERROR {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := b.conn // while opening, before the read pool exists
	if b.read != nil {
		var cerr error
		if c, cerr = b.read.Conn(ctx); cerr != nil {
			return nil
		}
		defer c.Close()
	}
	if c == nil {
		return nil
	}
	have, terr := tableNames(ctx, c)
	if terr != nil {
		return nil
	}
	for _, name := range tables {
		if !have[name] {
			return b.missingTable(name)
		}
	}
	for _, name := range laneTables {
		if !b.noLanes && !have[name] {
			return b.missingTable(name)
		}
	}
	return nil
}

// readErr maps a read failure to the store's typed errors.
func (b *Backend) readErr(err error, thread, ns string, seq int64, what string) error {
	if err == nil {
		return nil
	}
	if isCorrupt(err) {
		return &store.CorruptError{Thread: thread, Namespace: ns, Seq: seq, What: "database (" + what + ")", Err: fmt.Errorf("%s: %w", b.path, err)}
	}
	if d := b.damage(err); d != nil {
		return d
	}
	return fmt.Errorf("store: %s of thread %q: %w", what, thread, err)
}

// writeErr maps a failed write transaction to the store's typed errors.
func (b *Backend) writeErr(what string, err error) error {
	if isCorrupt(err) {
		return fmt.Errorf("%w: %s: %s: %v", store.ErrCorrupt, b.path, what, err)
	}
	if d := b.damage(err); d != nil {
		return d
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

// run executes a batch in one transaction and answers every job.
func (b *Backend) run(batch []*job) {
	ctx := context.Background()
	errs := make([]error, len(batch))
	fail := func(err error) {
		for _, j := range batch {
			j.done <- err
		}
	}
	if _, err := b.begin.ExecContext(ctx); err != nil {
		fail(b.writeErr("begin", err))
		return
	}
	for i, j := range batch {
		if err := j.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		err := j.fn(ctx, b.conn)
		if err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
			_, _ = b.rollback.ExecContext(ctx)
			if !errors.Is(err, store.ErrInvalidArgument) {
				err = b.writeErr("write", err)
			}
			fail(err)
			return
		}
		errs[i] = err
	}
	if _, err := b.commit.ExecContext(ctx); err != nil {
		_, _ = b.rollback.ExecContext(ctx)
		fail(b.writeErr("commit", err))
		return
	}
	b.wmu.Lock()
	b.stats.Jobs += int64(len(batch))
	b.stats.Transactions++
	for _, j := range batch {
		b.walPages += j.pages
	}
	full := b.walPages >= b.walLimit
	if full {
		b.walPages = 0
	}
	b.wmu.Unlock()
	if full {
		b.ckpt.poke()
	}
	b.ckpt.finishUp(ctx, b.conn)
	if len(batch) > 1 && b.log.Enabled(ctx, slog.LevelDebug) {
		b.log.Debug("group commit", "path", b.path, "jobs", len(batch))
	}
	for i, j := range batch {
		j.done <- errs[i]
	}
}

// do queues fn and returns when its transaction has committed (or failed).
// The caller that finds nobody leading becomes the leader: it runs the queue
// in batches, in its own goroutine, until its own job is done, then hands
// the lead to the oldest waiting caller. Commits that arrive while a batch
// runs are grouped into the next one.
func (b *Backend) do(ctx context.Context, fn func(ctx context.Context, c *sql.Conn) error) error {
	return b.doSized(ctx, 0, fn)
}

// doSized is do for a job that writes about bytes of blobs.
func (b *Backend) doSized(ctx context.Context, bytes int, fn func(ctx context.Context, c *sql.Conn) error) error {
	if b.readOnly {
		return fmt.Errorf("%w: %s", store.ErrReadOnly, b.path)
	}
	j := &job{ctx: ctx, fn: fn, done: make(chan error, 1), pages: walEstimate(bytes)}
	b.wmu.Lock()
	if b.closed {
		b.wmu.Unlock()
		return store.ErrClosed
	}
	b.queue = append(b.queue, j)
	if b.leading {
		b.wmu.Unlock()
		// Once queued the job runs: a caller that stops waiting could not
		// tell whether it committed, so it waits for the answer.
		if err := <-j.done; err != errLead {
			return err
		}
		b.wmu.Lock()
	} else {
		b.leading = true
	}
	// Lead: run batches until our own job has an answer.
	for {
		n := min(len(b.queue), b.maxBatch)
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.wmu.Unlock()
		b.run(batch)
		b.wmu.Lock()
		select {
		case err := <-j.done:
			if len(b.queue) > 0 {
				b.queue[0].done <- errLead
			} else {
				b.leading = false
				b.idle.Broadcast()
			}
			b.wmu.Unlock()
			return err
		default:
		}
	}
}

// savepoint runs fn so that its statements commit together or not at all.
func savepoint(ctx context.Context, c *sql.Conn, fn func() error) error {
	if _, err := c.ExecContext(ctx, "SAVEPOINT job"); err != nil {
		return err
	}
	if err := fn(); err != nil {
		_, _ = c.ExecContext(ctx, "ROLLBACK TO job")
		_, _ = c.ExecContext(ctx, "RELEASE job")
		return err
	}
	_, err := c.ExecContext(ctx, "RELEASE job")
	return err
}

// CreateThread implements store.Backend.
func (b *Backend) CreateThread(ctx context.Context, t store.ThreadRecord) error {
	// An existing thread is refused before anything is written, and a
	// failure after it fails the whole batch: no savepoint is needed.
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		res, err := b.ensureThread.ExecContext(ctx, t.ID, t.Tenant, nullBytes(t.Metadata), t.CreatedAt, int64(t.Sum))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: thread %q exists", store.ErrConflict, t.ID)
		}
		return b.indexThread(ctx, t, 1)
	})
}

func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// threadColumns reads a thread record with its head (the newest row of
// its root namespace); oldThreadColumns the same from a file of a format
// before 5, and legacyThreadColumns from a format 1 file, whose rows have
// no checksum.
var (
	threadHead    = `FROM lanes l JOIN checkpoints c ON ` + inLane + ` WHERE l.thread = t.id AND l.ns = '' ORDER BY c.id DESC LIMIT 1`
	threadColumns = `t.id, t.tenant, t.metadata, t.created_at,
	COALESCE((SELECT c.id - (l.id << 32) ` + threadHead + `), 0),
	COALESCE((SELECT c.created_at ` + threadHead + `), 0), t.crc`
)

const (
	oldThreadColumns = `t.id, t.tenant, t.metadata, t.created_at,
	COALESCE((SELECT c.seq FROM checkpoints c WHERE c.thread = t.id AND c.ns = '' ORDER BY c.seq DESC LIMIT 1), 0),
	COALESCE((SELECT c.created_at FROM checkpoints c WHERE c.thread = t.id AND c.ns = '' ORDER BY c.seq DESC LIMIT 1), 0), t.crc`
	legacyThreadColumns = `t.id, t.tenant, t.metadata, t.created_at,
	COALESCE((SELECT c.seq FROM checkpoints c WHERE c.thread = t.id AND c.ns = '' ORDER BY c.seq DESC LIMIT 1), 0),
	COALESCE((SELECT c.created_at FROM checkpoints c WHERE c.thread = t.id AND c.ns = '' ORDER BY c.seq DESC LIMIT 1), 0), 0`
)

// listColumns are threadColumns with the status (format 6).
var listColumns = threadColumns + `, t.status`

func (b *Backend) threadColumns() string {
	switch {
	case b.legacy:
		return legacyThreadColumns
	case b.noLanes:
		return oldThreadColumns
	case b.noIndex:
		return threadColumns
	}
	return listColumns
}

func (b *Backend) scanThread(sc interface{ Scan(...any) error }) (store.ThreadRecord, error) {
	var r store.ThreadRecord
	var sum int64
	var err error
	if b.noIndex {
		err = sc.Scan(&r.ID, &r.Tenant, &r.Metadata, &r.CreatedAt, &r.Head, &r.HeadAt, &sum)
	} else {
		var st int
		err = sc.Scan(&r.ID, &r.Tenant, &r.Metadata, &r.CreatedAt, &r.Head, &r.HeadAt, &sum, &st)
		r.Status = store.ThreadStatus(st)
	}
	r.Sum = uint32(sum)
	if b.legacy {
		r.Sum = store.ThreadChecksum(&r)
	}
	return r, err
}

// Thread implements store.Backend.
func (b *Backend) Thread(ctx context.Context, id string) (store.ThreadRecord, error) {
	r, err := b.scanThread(b.read.QueryRowContext(ctx, `SELECT `+b.threadColumns()+` FROM threads t WHERE t.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("%w: thread %q", store.ErrNotFound, id)
	}
	return r, b.readErr(err, id, "", 0, "thread")
}

// metadataMatch compares one top-level metadata member with a JSON scalar.
// Key and value are parameters; the text of the query never holds them.
const metadataMatch = ` AND EXISTS (SELECT 1 FROM json_each(t.metadata) j WHERE j.key = ? AND
	(CASE j.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN 'null' ELSE json_quote(j.value) END) = ?)`

// metadataAbsent: a top-level metadata member absent or null (a null
// filter), on a file without the metadata index.
const metadataAbsent = ` AND NOT EXISTS (SELECT 1 FROM json_each(t.metadata) j WHERE j.key = ? AND j.type <> 'null')`

// Threads implements store.Backend.
func (b *Backend) Threads(ctx context.Context, q store.ThreadQuery) ([]store.ThreadRecord, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT ` + b.threadColumns() + ` FROM threads t WHERE t.id > ?`)
	args := []any{q.After}
	if q.Tenant != "" {
		sb.WriteString(` AND t.tenant = ?`)
		args = append(args, q.Tenant)
	}
	if b.noIndex {
		for k, v := range q.Metadata {
			if string(v) == "null" {
				sb.WriteString(metadataAbsent)
				args = append(args, k)
				continue
			}
			sb.WriteString(metadataMatch)
			args = append(args, k, string(v))
		}
	} else {
		w := sqlWhere{args: args}
		sb.WriteString(w.where(store.ListQuery{AllTenants: true, Meta: q.Meta}))
		args = w.args
	}
	sb.WriteString(` ORDER BY t.id`)
	if q.Limit > 0 {
		sb.WriteString(` LIMIT ?`)
		args = append(args, q.Limit)
	}
	rows, err := b.read.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, b.readErr(err, q.After, "", 0, "thread list")
	}
	defer rows.Close()
	var out []store.ThreadRecord
	for rows.Next() {
		r, err := b.scanThread(rows)
		if err != nil {
			return nil, b.readErr(err, q.After, "", 0, "thread list")
		}
		out = append(out, r)
	}
	return out, b.readErr(rows.Err(), q.After, "", 0, "thread list")
}

// DeleteThread implements store.Backend.
func (b *Backend) DeleteThread(ctx context.Context, id string) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		return savepoint(ctx, c, func() error {
			if err := b.unindexThread(ctx, c, id); err != nil {
				return err
			}
			res, err := c.ExecContext(ctx, `DELETE FROM threads WHERE id = ?`, id)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			if _, err := c.ExecContext(ctx, `DELETE FROM run_events WHERE run IN (SELECT id FROM runs WHERE thread = ?)`, id); err != nil {
				return err
			}
			r, err := c.ExecContext(ctx, `DELETE FROM checkpoints WHERE id IN (SELECT c.id FROM lanes l JOIN checkpoints c ON `+inLane+` WHERE l.thread = ?)`, id)
			if err != nil {
				return err
			}
			m, _ := r.RowsAffected()
			n += m
			for _, table := range []string{"lanes", "snapshots", "writes", "runs"} {
				r, err := c.ExecContext(ctx, `DELETE FROM `+table+` WHERE thread = ?`, id)
				if err != nil {
					return err
				}
				m, _ := r.RowsAffected()
				n += m
			}
			if n == 0 {
				return fmt.Errorf("%w: thread %q", store.ErrNotFound, id)
			}
			return nil
		})
	})
}

// Insert implements store.Backend.
func (b *Backend) Insert(ctx context.Context, r store.Row) error {
	if r.Seq < 1 || r.Seq > maxSeq || r.Parent < 0 || r.Parent >= r.Seq {
		return fmt.Errorf("%w: thread %q namespace %q: checkpoint %d on parent %d: a SQLite store holds checkpoints 1 to %d, each after its parent", store.ErrInvalidArgument, r.Thread, r.Namespace, r.Seq, r.Parent, maxSeq)
	}
	return b.doSized(ctx, len(r.Patch)+len(r.Meta)+len(r.Snapshot), func(ctx context.Context, c *sql.Conn) error {
		if r.NewThread {
			// The thread and its first row commit together or not at all.
			return savepoint(ctx, c, func() error { return b.insert(ctx, c, r) })
		}
		return b.insert(ctx, c, r)
	})
}

// insert runs the statements of Insert inside the batch transaction.
func (b *Backend) insert(ctx context.Context, c *sql.Conn, r store.Row) error {
	if err := checkFence(ctx, c, r); err != nil {
		return err
	}
	if err := b.createThread(ctx, c, r); err != nil {
		return err
	}
	if r.Parent == 0 {
		// A lane's first row: the lane may be new.
		if _, err := b.ensureLane.ExecContext(ctx, r.Thread, r.Namespace); err != nil {
			return err
		}
	}
	has := 0
	if r.HasSnapshot {
		has = 1
	}
	patch := r.Patch
	if patch == nil {
		patch = []byte{} // NULL means a missing parent
	}
	_, err := b.insertRow.ExecContext(ctx, r.Thread, r.Namespace, r.Seq, r.Parent, r.Base, r.Since, r.BaseSize,
		int(r.Status), r.CreatedAt, has, nullBytes(r.Meta), patch, int64(r.Sum))
	switch {
	case sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_NOTNULL:
		return fmt.Errorf("%w: thread %q namespace %q has no checkpoint %d to extend", store.ErrConflict, r.Thread, r.Namespace, r.Parent)
	case isConstraint(err):
		return fmt.Errorf("%w: thread %q namespace %q seq %d exists", store.ErrConflict, r.Thread, r.Namespace, r.Seq)
	case err != nil:
		return err
	}
	if r.HasSnapshot {
		if _, err := b.insertSnap.ExecContext(ctx, r.Thread, r.Namespace, r.Seq, r.Snapshot); err != nil {
			return err
		}
	}
	if r.Head != nil && r.Namespace == "" {
		return b.setHead(ctx, r.Thread, r.Head.Status, r.CreatedAt, true)
	}
	return nil
}

// ReadOnly reports whether the backend was opened read-only (an engine
// over it then writes no late snapshots).
func (b *Backend) ReadOnly() bool { return b.readOnly }

// AttachSnapshot implements store.SnapshotAttacher: the row's new
// bookkeeping and its snapshot, in the writer's next transaction.
func (b *Backend) AttachSnapshot(ctx context.Context, r store.Row, old uint32) (bool, error) {
	var ok bool
	err := b.doSized(ctx, len(r.Snapshot), func(ctx context.Context, c *sql.Conn) error {
		res, err := b.attachRow.ExecContext(ctx, r.Base, r.Since, r.BaseSize, int64(r.Sum), r.Thread, r.Namespace, r.Seq, int64(old))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		if _, err := b.insertSnap.ExecContext(ctx, r.Thread, r.Namespace, r.Seq, r.Snapshot); err != nil {
			return err
		}
		ok = true
		return nil
	})
	return ok, err
}

// createThread creates the thread record a first row carries.
func (b *Backend) createThread(ctx context.Context, c *sql.Conn, r store.Row) error {
	t := r.Create
	if t == nil || r.Seq != 1 {
		return nil
	}
	res, err := b.ensureThread.ExecContext(ctx, t.ID, t.Tenant, nullBytes(t.Metadata), t.CreatedAt, int64(t.Sum))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if r.NewThread {
			return fmt.Errorf("%w: thread %q exists", store.ErrConflict, t.ID)
		}
		return nil
	}
	return b.indexThread(ctx, *t, 1)
}

// laneKey is the SQL of the first key of a thread namespace's lane, lane
// << 32, the lane looked up by the parameters named thread and ns; when the
// namespace has no lane, -1 << 32, below every key.
func laneKey(thread, ns string) string {
	return `(coalesce((SELECT id FROM lanes WHERE thread = ` + thread + ` AND ns = ` + ns + `), -1) << 32)`
}

// laneRows is the SQL of a lane's rows, between seq from and to
// (parameter names), for a query on checkpoints c joined to lanes l.
func laneRows(from, to string) string {
	return `c.id BETWEEN (l.id << 32) + ` + from + ` AND (l.id << 32) + ` + to
}

// maxSeq is the largest seq a lane holds: a row's key is lane << 32 | seq.
const maxSeq = 1<<32 - 1

// inLane is the SQL that joins a lane l to all its rows c.
var inLane = laneRows("1", strconv.Itoa(maxSeq))

// checkSeqs refuses to key by lane a file whose rows have a seq beyond
// 32 bits (format 5 cannot hold them).
func (b *Backend) checkSeqs(ctx context.Context) error {
	var thread, ns string
	var seq int64
	err := b.conn.QueryRowContext(ctx, `SELECT thread, ns, seq FROM checkpoints WHERE seq < 1 OR seq > ? LIMIT 1`, maxSeq).Scan(&thread, &ns, &seq)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%w: thread %q namespace %q has checkpoint %d, outside 1 to %d, which format 5 cannot hold", store.ErrUnsupportedFormat, thread, ns, seq, maxSeq)
}

// addChecksums gives version 1 tables their crc columns and computes the
// checksum of every row, inside the migration transaction.
func (b *Backend) addChecksums(ctx context.Context) error {
	for _, table := range []string{"threads", "checkpoints"} {
		var n int
		if err := b.conn.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info(?) WHERE name = 'crc'`, table).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := b.conn.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN crc INTEGER NOT NULL DEFAULT 0`); err != nil {
				return err
			}
		}
	}
	if err := b.sumThreads(ctx); err != nil {
		return err
	}
	return b.sumCheckpoints(ctx)
}

const upgradePage = 512

func (b *Backend) sumThreads(ctx context.Context) error {
	after := ""
	for {
		rows, err := b.conn.QueryContext(ctx, `SELECT id, tenant, metadata, created_at FROM threads WHERE id > ? ORDER BY id LIMIT ?`, after, upgradePage)
		if err != nil {
			return err
		}
		var page []store.ThreadRecord
		for rows.Next() {
			var t store.ThreadRecord
			if err := rows.Scan(&t.ID, &t.Tenant, &t.Metadata, &t.CreatedAt); err != nil {
				rows.Close()
				return err
			}
			page = append(page, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for i := range page {
			if _, err := b.conn.ExecContext(ctx, `UPDATE threads SET crc = ? WHERE id = ?`, int64(store.ThreadChecksum(&page[i])), page[i].ID); err != nil {
				return err
			}
		}
		if len(page) < upgradePage {
			return nil
		}
		after = page[len(page)-1].ID
	}
}

func (b *Backend) sumCheckpoints(ctx context.Context) error {
	var last store.Row
	for {
		rows, err := b.conn.QueryContext(ctx, `SELECT thread, ns, seq, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch
			FROM checkpoints WHERE (thread, ns, seq) > (?, ?, ?) ORDER BY thread, ns, seq LIMIT ?`, last.Thread, last.Namespace, last.Seq, upgradePage)
		if err != nil {
			return err
		}
		var page []store.Row
		for rows.Next() {
			var r store.Row
			var status int64
			if err := rows.Scan(&r.Thread, &r.Namespace, &r.Seq, &r.Parent, &r.Base, &r.Since, &r.BaseSize, &status, &r.CreatedAt, &r.HasSnapshot, &r.Meta, &r.Patch); err != nil {
				rows.Close()
				return err
			}
			r.Status = store.Status(status)
			page = append(page, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for i := range page {
			r := &page[i]
			if _, err := b.conn.ExecContext(ctx, `UPDATE checkpoints SET crc = ? WHERE thread = ? AND ns = ? AND seq = ?`, int64(store.RowChecksum(r)), r.Thread, r.Namespace, r.Seq); err != nil {
				return err
			}
		}
		if len(page) < upgradePage {
			return nil
		}
		last = page[len(page)-1]
	}
}

// rowsQuery builds the query text and arguments of a RowQuery. The text
// depends only on the query's flags and the file's format, so there are
// few distinct texts and each is prepared once.
func rowsQuery(q store.RowQuery, legacy, noLanes bool) (string, []any) {
	if noLanes {
		return oldRowsQuery(q, legacy)
	}
	var sb strings.Builder
	sb.WriteString(`SELECT c.id - (l.id << 32), c.parent, c.base, c.has_snapshot, c.since, c.base_size, c.status, c.created_at, c.meta, c.patch, c.crc`)
	sb.WriteString(` FROM lanes l JOIN checkpoints c ON ` + laneRows("?", "?") + ` WHERE l.thread = ? AND l.ns = ?`)
	to := int64(maxSeq)
	if q.To > 0 {
		to = min(q.To, maxSeq)
	}
	args := []any{max(q.From, 1), to, q.Thread, q.Namespace}
	return orderLimit(&sb, q, "c.id", args)
}

// oldRowsQuery is rowsQuery on a file of a format before 5.
func oldRowsQuery(q store.RowQuery, legacy bool) (string, []any) {
	var sb strings.Builder
	sb.WriteString(`SELECT c.seq, c.parent, c.base, c.has_snapshot, c.since, c.base_size, c.status, c.created_at, c.meta, c.patch`)
	if legacy {
		sb.WriteString(`, 0`)
	} else {
		sb.WriteString(`, c.crc`)
	}
	sb.WriteString(` FROM checkpoints c`)
	sb.WriteString(` WHERE c.thread = ? AND c.ns = ? AND c.seq >= ?`)
	args := []any{q.Thread, q.Namespace, q.From}
	if q.To > 0 {
		sb.WriteString(` AND c.seq <= ?`)
		args = append(args, q.To)
	}
	return orderLimit(&sb, q, "c.seq", args)
}

// orderLimit ends a rows query: its order by key and its limit.
func orderLimit(sb *strings.Builder, q store.RowQuery, key string, args []any) (string, []any) {
	sb.WriteString(` ORDER BY ` + key)
	if q.Desc {
		sb.WriteString(` DESC`)
	}
	if q.Limit > 0 {
		sb.WriteString(` LIMIT ?`)
		args = append(args, q.Limit)
	}
	return sb.String(), args
}

const snapshotsQuery = `SELECT seq, data FROM snapshots WHERE thread = ? AND ns = ? AND seq >= ? AND seq <= ?`

// prepareReads prepares the statements that loading a checkpoint uses, so
// the first load does not pay for them.
func (b *Backend) prepareReads(ctx context.Context) error {
	for _, q := range []store.RowQuery{
		{Desc: true, Limit: 1},
		{From: 1, To: 1},
		{From: 1, To: 2},
		{To: 1, Desc: true, Limit: 1},
	} {
		text, _ := rowsQuery(q, b.legacy, b.noLanes)
		if err := b.prepare(ctx, text); err != nil {
			return err
		}
	}
	return b.prepare(ctx, snapshotsQuery)
}

// Rows implements store.Backend.
func (b *Backend) Rows(ctx context.Context, q store.RowQuery) ([]store.Row, error) {
	text, args := rowsQuery(q, b.legacy, b.noLanes)
	at := q.From
	if q.To > 0 {
		at = q.To
	}
	rows, err := b.query(ctx, text, args...)
	if err != nil {
		return nil, b.readErr(err, q.Thread, q.Namespace, at, "checkpoints")
	}
	defer rows.Close()
	var out []store.Row
	if q.Limit > 0 {
		out = make([]store.Row, 0, q.Limit)
	}
	for rows.Next() {
		r := store.Row{Thread: q.Thread, Namespace: q.Namespace}
		var status, has, sum int64
		if err := rows.Scan(&r.Seq, &r.Parent, &r.Base, &has, &r.Since, &r.BaseSize, &status, &r.CreatedAt, &r.Meta, &r.Patch, &sum); err != nil {
			return nil, b.readErr(err, q.Thread, q.Namespace, r.Seq, "checkpoint")
		}
		r.Status = store.Status(status) // an out-of-range value fails the checksum
		r.HasSnapshot = has == 1
		r.Sum = uint32(sum)
		if status != int64(r.Status) || (has != 0 && has != 1) || sum != int64(r.Sum) {
			r.Sum = ^store.RowChecksum(&r) // what was read is not what was written
		} else if b.legacy {
			r.Sum = store.RowChecksum(&r)
		}
		if r.Patch == nil {
			r.Patch = []byte{}
		}
		out = append(out, r)
	}
	if err := b.readErr(rows.Err(), q.Thread, q.Namespace, at, "checkpoints"); err != nil {
		return nil, err
	}
	if q.Snapshots {
		if err := b.fillSnapshots(ctx, q, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fillSnapshots reads the snapshots of the rows that have one, in one
// range query.
func (b *Backend) fillSnapshots(ctx context.Context, q store.RowQuery, out []store.Row) error {
	idx := map[int64]int{}
	lo, hi := int64(-1), int64(-1)
	for i := range out {
		if out[i].HasSnapshot {
			idx[out[i].Seq] = i
			if lo < 0 || out[i].Seq < lo {
				lo = out[i].Seq
			}
			hi = max(hi, out[i].Seq)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	rows, err := b.query(ctx, snapshotsQuery, q.Thread, q.Namespace, lo, hi)
	if err != nil {
		return b.readErr(err, q.Thread, q.Namespace, lo, "snapshots")
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			return b.readErr(err, q.Thread, q.Namespace, seq, "snapshot")
		}
		if i, ok := idx[seq]; ok {
			out[i].Snapshot = data
		}
	}
	return b.readErr(rows.Err(), q.Thread, q.Namespace, lo, "snapshots")
}

// Namespaces implements store.Backend.
func (b *Backend) Namespaces(ctx context.Context, thread string) ([]store.NamespaceRecord, error) {
	q := `SELECT l.ns, max(c.id) - (l.id << 32), count(*) FROM lanes l JOIN checkpoints c ON ` + inLane + ` WHERE l.thread = ? GROUP BY l.ns ORDER BY l.ns`
	if b.noLanes {
		q = `SELECT ns, max(seq), count(*) FROM checkpoints WHERE thread = ? GROUP BY ns ORDER BY ns`
	}
	rows, err := b.read.QueryContext(ctx, q, thread)
	if err != nil {
		return nil, b.readErr(err, thread, "", 0, "namespaces")
	}
	defer rows.Close()
	var out []store.NamespaceRecord
	for rows.Next() {
		var r store.NamespaceRecord
		if err := rows.Scan(&r.Name, &r.Head, &r.Count); err != nil {
			return nil, b.readErr(err, thread, "", 0, "namespaces")
		}
		out = append(out, r)
	}
	return out, b.readErr(rows.Err(), thread, "", 0, "namespaces")
}

// DeleteRanges implements store.Backend.
func (b *Backend) DeleteRanges(ctx context.Context, thread, ns string, head int64, ranges []store.SeqRange, rebase []store.Rebase) (int64, error) {
	var n int64
	size := 0
	for _, rb := range rebase {
		size += len(rb.Row.Snapshot)
	}
	err := b.doSized(ctx, size, func(ctx context.Context, c *sql.Conn) error {
		return savepoint(ctx, c, func() error {
			var newest sql.NullInt64
			if err := c.QueryRowContext(ctx, `SELECT max(c.id) - (l.id << 32) FROM lanes l JOIN checkpoints c ON `+inLane+` WHERE l.thread = ? AND l.ns = ?`, thread, ns).Scan(&newest); err != nil {
				return err
			}
			if newest.Int64 != head {
				return fmt.Errorf("%w: thread %q namespace %q grew while it was pruned (head %d, now %d)", store.ErrConflict, thread, ns, head, newest.Int64)
			}
			if err := b.rebase(ctx, c, rebase); err != nil {
				return err
			}
			for _, r := range ranges {
				res, err := c.ExecContext(ctx, `DELETE FROM checkpoints WHERE id BETWEEN `+laneKey("?1", "?2")+` + ?3 AND `+laneKey("?1", "?2")+` + ?4`, thread, ns, max(r.From, 1), min(r.To, maxSeq))
				if err != nil {
					return err
				}
				k, _ := res.RowsAffected()
				n += k
				for _, table := range []string{"snapshots", "writes"} {
					if _, err := c.ExecContext(ctx, `DELETE FROM `+table+` WHERE thread = ? AND ns = ? AND seq BETWEEN ? AND ?`, thread, ns, r.From, r.To); err != nil {
						return err
					}
				}
			}
			if ns == "" {
				return b.rootEmptied(ctx, c, thread)
			}
			return nil
		})
	})
	return n, err
}

// rebase rewrites the kept rows of a prune (store.Rebase), inside its
// transaction: a row changed since it was read fails the prune.
func (b *Backend) rebase(ctx context.Context, c *sql.Conn, rebase []store.Rebase) error {
	for _, rb := range rebase {
		r, has := rb.Row, 0
		if r.HasSnapshot {
			has = 1
		}
		res, err := c.ExecContext(ctx, `UPDATE checkpoints SET has_snapshot = ?, base = ?, since = ?, base_size = ?, crc = ?
			WHERE id = `+laneKey("?", "?")+` + ? AND crc = ?`, has, r.Base, r.Since, r.BaseSize, int64(r.Sum), r.Thread, r.Namespace, r.Seq, int64(rb.Old))
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil || k == 0 {
			if err != nil {
				return err
			}
			return fmt.Errorf("%w: thread %q namespace %q checkpoint %d changed while it was pruned", store.ErrConflict, r.Thread, r.Namespace, r.Seq)
		}
		if r.HasSnapshot && r.Snapshot != nil {
			if _, err := c.ExecContext(ctx, `INSERT OR REPLACE INTO snapshots (thread, ns, seq, data) VALUES (?,?,?,?)`, r.Thread, r.Namespace, r.Seq, r.Snapshot); err != nil {
				return err
			}
		}
	}
	return nil
}

// PutWrites implements store.Backend.
func (b *Backend) PutWrites(ctx context.Context, thread, ns string, seq int64, ws []store.Write) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		var exists int
		if err := c.QueryRowContext(ctx, `SELECT count(*) FROM threads WHERE id = ?`, thread).Scan(&exists); err != nil {
			return err
		}
		if exists == 0 {
			return fmt.Errorf("%w: thread %q", store.ErrNotFound, thread)
		}
		return savepoint(ctx, c, func() error {
			for _, w := range ws {
				if _, err := c.ExecContext(ctx, `INSERT OR REPLACE INTO writes (thread, ns, seq, task, node, data) VALUES (?,?,?,?,?,?)`,
					thread, ns, seq, w.Task, w.Node, []byte(w.Update)); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// Writes implements store.Backend.
func (b *Backend) Writes(ctx context.Context, thread, ns string, seq int64) ([]store.Write, error) {
	rows, err := b.read.QueryContext(ctx, `SELECT task, node, data FROM writes WHERE thread = ? AND ns = ? AND seq = ? ORDER BY task`, thread, ns, seq)
	if err != nil {
		return nil, b.readErr(err, thread, ns, seq, "pending writes")
	}
	defer rows.Close()
	var out []store.Write
	for rows.Next() {
		var w store.Write
		var data []byte
		if err := rows.Scan(&w.Task, &w.Node, &data); err != nil {
			return nil, b.readErr(err, thread, ns, seq, "pending writes")
		}
		w.Update = data
		out = append(out, w)
	}
	return out, b.readErr(rows.Err(), thread, ns, seq, "pending writes")
}

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

var _ store.Backend = (*Backend)(nil)
