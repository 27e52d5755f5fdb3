package postgres

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cairn-dev/cairn/store"
)

// The layout: numbered migrations (migrations/NNNN_name.sql, each
// perhaps followed by a Go step) and the baseline a new store is made
// from (schema.sql, the same layout at once). cairn_format holds the
// number of the store's last migration. Version 2 adds a checksum (crc) to
// every thread and checkpoint row; version 3 prefixes every table cairn_;
// version 4 adds the HTTP server's runs and their event logs; version 5
// the long-term memory store's items; version 6 the thread index
// (threadindex.go); version 7 keeps each tenant's thread under its key,
// tenant/id (tenantkeys.go).
var (
	//go:embed migrations/*.sql
	migrationFiles embed.FS
	//go:embed schema.sql
	baseline string

	migrations = store.MustLoadMigrations(migrationFiles, "migrations", map[int]string{
		2: "computes the checksum of every thread and checkpoint row",
		6: "fills the thread index: each thread's status and touch time from its head, its metadata entries, the counters",
		7: "refuses a thread whose key another thread has, before the rows are renamed; gives each renamed thread and checkpoint row the checksum of its new name, and moves its counts to the shard of its new name",
	})
	// formatVersion is the layout this code writes.
	formatVersion = store.Latest(migrations)
)

// tables are the tables of a Cairn store besides cairn_format.
var tables = []string{"cairn_threads", "cairn_checkpoints", "cairn_snapshots", "cairn_writes", "cairn_runs", "cairn_run_events", "cairn_api_keys", "cairn_leases", "cairn_items", "cairn_thread_meta", "cairn_thread_counts", "cairn_thread_totals"}

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

// Backend is a store.Backend on PostgreSQL.
type Backend struct {
	pool     *pgxpool.Pool
	readOnly bool
	group    *grouper // nil: each append its own transaction
	queue    inserter
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

// migrate brings the database to formatVersion in one transaction, under
// an advisory lock so that processes opening a new store at once wait for
// each other: a new store gets the baseline, an older one its pending
// migrations. With noMigrate, a store that is behind is refused instead.
func (b *Backend) migrate(ctx context.Context, noMigrate bool, log *slog.Logger) error {
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store: postgres: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7262465)`); err != nil {
		return fmt.Errorf("store: postgres: %w", err)
	}
	if err := refuseForeign(ctx, tx); err != nil {
		return err
	}
	v, err := formatOf(ctx, tx)
	switch {
	case err != nil:
		return fmt.Errorf("store: postgres: %w", err)
	case v > formatVersion:
		return fmt.Errorf("%w: the database has format %d, this Cairn reads up to %d", store.ErrUnsupportedFormat, v, formatVersion)
	case v == formatVersion:
		return nil
	case noMigrate:
		return fmt.Errorf("%w: the database has format %d, this Cairn writes %d: run cairn migrate up", store.ErrMigrationNeeded, v, formatVersion)
	case v == 0:
		if _, err := tx.Exec(ctx, baseline); err != nil {
			return fmt.Errorf("store: postgres: create tables: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO cairn_format (id, version) VALUES (1, $1)`, formatVersion); err != nil {
			return fmt.Errorf("store: postgres: %w", err)
		}
	default:
		if err := applyMigrations(ctx, tx, v); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("store: postgres: %w", err)
	}
	if log != nil {
		log.Info("store migrated", "from", v, "to", formatVersion)
	}
	return nil
}

// formatOf reads the format version (0: no Cairn store yet).
func formatOf(ctx context.Context, tx pgx.Tx) (int, error) {
	var format bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('cairn_format') IS NOT NULL`).Scan(&format); err != nil || !format {
		return 0, err
	}
	var v int
	err := tx.QueryRow(ctx, `SELECT version FROM cairn_format WHERE id = 1`).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// applyMigrations runs the migrations a store at version v lacks, with
// their Go steps, and records the new version.
func applyMigrations(ctx context.Context, tx pgx.Tx, v int) error {
	for _, m := range store.Pending(migrations, v) {
		if err := applyMigration(ctx, tx, m); err != nil {
			return fmt.Errorf("store: postgres: migration %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE cairn_format SET version = $1 WHERE id = 1`, formatVersion); err != nil {
		return fmt.Errorf("store: postgres: %w", err)
	}
	return nil
}

// applyMigration runs one migration with its Go steps, before and after
// its SQL.
func applyMigration(ctx context.Context, tx pgx.Tx, m store.Migration) error {
	if m.Version == 7 {
		if err := checkTenantKeys(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return err
	}
	switch m.Version {
	case 2:
		return addChecksums(ctx, tx)
	case 6:
		return fillIndex(ctx, tx)
	case 7:
		return sumKeyed(ctx, tx)
	}
	return nil
}

// refuseForeign refuses a database that has tables named like Cairn's but
// no cairn_format table: another program's, which Cairn must not change.
func refuseForeign(ctx context.Context, tx pgx.Tx) error {
	var format bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('cairn_format') IS NOT NULL`).Scan(&format); err != nil {
		return fmt.Errorf("store: postgres: %w", err)
	}
	if format {
		return nil
	}
	for _, t := range tables {
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, t).Scan(&ok); err != nil {
			return fmt.Errorf("store: postgres: %w", err)
		}
		if ok {
			return fmt.Errorf("%w: the database has a table %q but no cairn_format: refusing to change another program's tables", store.ErrNotStore, t)
		}
	}
	return nil
}

// addChecksums computes the checksum of every row of a version 1 store
// whose tables just got their crc columns (migration 2; the tables are not
// prefixed yet), inside the migration transaction.
func addChecksums(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT id, tenant, metadata::text, created_at FROM threads`)
	if err != nil {
		return err
	}
	var threads []store.ThreadRecord
	for rows.Next() {
		var t store.ThreadRecord
		var meta *string
		if err := rows.Scan(&t.ID, &t.Tenant, &meta, &t.CreatedAt); err != nil {
			rows.Close()
			return err
		}
		if meta != nil {
			t.Metadata = []byte(*meta)
		}
		threads = append(threads, t)
	}
	if rows.Close(); rows.Err() != nil {
		return rows.Err()
	}
	for i := range threads {
		if _, err := tx.Exec(ctx, `UPDATE threads SET crc = $1 WHERE id = $2`, int64(store.ThreadChecksum(&threads[i])), threads[i].ID); err != nil {
			return err
		}
	}
	return sumCheckpoints(ctx, tx)
}

func sumCheckpoints(ctx context.Context, tx pgx.Tx) error {
	var last store.Row
	for {
		rows, err := tx.Query(ctx, `SELECT thread, ns, seq, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch
			FROM checkpoints WHERE (thread, ns, seq) > ($1, $2, $3) ORDER BY thread, ns, seq LIMIT 512`, last.Thread, last.Namespace, last.Seq)
		if err != nil {
			return err
		}
		var page []store.Row
		for rows.Next() {
			var r store.Row
			var status int16
			if err := rows.Scan(&r.Thread, &r.Namespace, &r.Seq, &r.Parent, &r.Base, &r.Since, &r.BaseSize, &status, &r.CreatedAt, &r.HasSnapshot, &r.Meta, &r.Patch); err != nil {
				rows.Close()
				return err
			}
			r.Status = store.Status(status)
			page = append(page, r)
		}
		if rows.Close(); rows.Err() != nil {
			return rows.Err()
		}
		batch := &pgx.Batch{}
		for i := range page {
			r := &page[i]
			batch.Queue(`UPDATE checkpoints SET crc = $1 WHERE thread = $2 AND ns = $3 AND seq = $4`, int64(store.RowChecksum(r)), r.Thread, r.Namespace, r.Seq)
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		if len(page) < 512 {
			return nil
		}
		last = page[len(page)-1]
	}
}

func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// wrap says what failed and classifies it: an unreachable server is
// store.ErrUnavailable, damage store.ErrCorrupt. An error already
// classified (a store error, or one wrap made) comes back as it is.
func wrap(err error, what, thread string) error {
	if err == nil {
		return nil
	}
	if classified(err) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "XX001" || pe.Code == "XX002") { // data_corrupted, index_corrupted
		return &store.CorruptError{Thread: thread, What: "database (" + what + ")", Err: err}
	}
	if unavailable(err) {
		return fmt.Errorf("%w: postgres: %s of thread %q: %w", store.ErrUnavailable, what, thread, err)
	}
	return fmt.Errorf("store: postgres: %s of thread %q: %w", what, thread, err)
}

// storeErrors are the store's errors wrap leaves as they are.
var storeErrors = []error{store.ErrConflict, store.ErrNotFound, store.ErrUnavailable, store.ErrInvalidArgument, store.ErrInvalidID,
	store.ErrCorrupt, store.ErrClosed, store.ErrReadOnly, store.ErrFenced, store.ErrLeaseHeld, store.ErrUnsupportedFormat,
	store.ErrMigrationNeeded, context.Canceled, context.DeadlineExceeded}

// classified reports whether err is one of storeErrors already.
func classified(err error) bool {
	for _, e := range storeErrors {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// fencedOr is the error of a fenced row r that was refused with
// conflict: ErrFenced when its lease has another token now (a worker
// took the thread over and wrote it), the conflict when it still has
// r's, and ErrUnavailable when the lease cannot be read — which of the
// two happened is then unknown, and the writer tries again once the
// server is back (a stale head it would then see as a conflict, a
// takeover as fenced).
func (b *Backend) fencedOr(ctx context.Context, r store.Row, conflict error) error {
	if r.Fence == 0 {
		return conflict
	}
	cur, err := b.Lease(ctx, r.Thread)
	switch {
	case err != nil:
		return wrap(err, "lease", r.Thread)
	case cur.Token != r.Fence:
		return store.FencedError(r.Thread, r.Fence, cur.Token)
	}
	return conflict
}

// inTx runs fn in a transaction; what failed — beginning or committing
// it included (a server that cannot be reached fails the BEGIN) — is
// wrapped as wrap does.
func (b *Backend) inTx(ctx context.Context, what, thread string, fn func(pgx.Tx) error) error {
	return wrap(pgx.BeginFunc(ctx, b.pool, fn), what, thread)
}

// unavailable reports whether err says the server could not be reached or
// went away, rather than refused the statement.
func unavailable(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) || errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// connection_exception (08…), admin_shutdown, crash_shutdown,
		// cannot_connect_now.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	return false
}

// CreateThread implements store.Backend.
func (b *Backend) CreateThread(ctx context.Context, t store.ThreadRecord) error {
	if err := b.writable(); err != nil {
		return err
	}
	args, err := createArgs(&t)
	if err != nil {
		return err
	}
	tag, err := b.pool.Exec(ctx, createThreadSQL, args...)
	if err != nil {
		return wrap(err, "create", t.ID)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: thread %q exists", store.ErrConflict, t.ID)
	}
	return nil
}

func nullJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

const threadColumns = `t.id, t.tenant, t.metadata::text, t.created_at,
	COALESCE((SELECT max(c.seq) FROM cairn_checkpoints c WHERE c.thread = t.id AND c.ns = ''), 0),
	COALESCE((SELECT c.created_at FROM cairn_checkpoints c WHERE c.thread = t.id AND c.ns = '' ORDER BY c.seq DESC LIMIT 1), 0)`

func (b *Backend) threadColumns() string { return threadColumns + `, t.crc, t.status` }

func (b *Backend) scanThread(row pgx.Row) (store.ThreadRecord, error) {
	var r store.ThreadRecord
	var meta *string
	var sum int64
	var st int16
	if err := row.Scan(&r.ID, &r.Tenant, &meta, &r.CreatedAt, &r.Head, &r.HeadAt, &sum, &st); err != nil {
		return r, err
	}
	r.Status = store.ThreadStatus(st)
	if meta != nil {
		r.Metadata = []byte(*meta)
	}
	r.Sum = uint32(sum)
	if sum != int64(r.Sum) {
		r.Sum = ^store.ThreadChecksum(&r)
	}
	return r, nil
}

// Thread implements store.Backend.
func (b *Backend) Thread(ctx context.Context, id string) (store.ThreadRecord, error) {
	r, err := b.scanThread(b.pool.QueryRow(ctx, `SELECT `+b.threadColumns()+` FROM cairn_threads t WHERE t.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("%w: thread %q", store.ErrNotFound, id)
	}
	return r, wrap(err, "thread", id)
}

// Threads implements store.Backend. Metadata filters are lookups in the
// metadata index, with keys and values as parameters.
func (b *Backend) Threads(ctx context.Context, q store.ThreadQuery) ([]store.ThreadRecord, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT ` + b.threadColumns() + ` FROM cairn_threads t WHERE t.id > $1`)
	args := []any{q.After}
	if q.Tenant != "" {
		args = append(args, q.Tenant)
		sb.WriteString(` AND t.tenant = $` + strconv.Itoa(len(args)))
	}
	w := pgWhere{args: args}
	sb.WriteString(w.where(store.ListQuery{AllTenants: true, Meta: q.Meta}))
	args = w.args
	sb.WriteString(` ORDER BY t.id`)
	if q.Limit > 0 {
		args = append(args, q.Limit)
		sb.WriteString(` LIMIT $` + strconv.Itoa(len(args)))
	}
	rows, err := b.pool.Query(ctx, sb.String(), args...)
	if err != nil {
		return nil, wrap(err, "thread list", q.After)
	}
	defer rows.Close()
	var out []store.ThreadRecord
	for rows.Next() {
		r, err := b.scanThread(rows)
		if err != nil {
			return nil, wrap(err, "thread list", q.After)
		}
		out = append(out, r)
	}
	return out, wrap(rows.Err(), "thread list", q.After)
}

// DeleteThread implements store.Backend.
func (b *Backend) DeleteThread(ctx context.Context, id string) error {
	if err := b.writable(); err != nil {
		return err
	}
	return b.inTx(ctx, "delete", id, func(tx pgx.Tx) error {
		if err := unindexThread(ctx, tx, id); err != nil {
			return wrap(err, "delete", id)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM cairn_run_events WHERE run IN (SELECT id FROM cairn_runs WHERE thread = $1)`, id); err != nil {
			return wrap(err, "delete", id)
		}
		var n int64
		for _, table := range []string{"cairn_threads", "cairn_checkpoints", "cairn_snapshots", "cairn_writes", "cairn_runs"} {
			col := "thread"
			if table == "cairn_threads" {
				col = "id"
			}
			tag, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE `+col+` = $1`, id)
			if err != nil {
				return wrap(err, "delete", id)
			}
			n += tag.RowsAffected()
		}
		if n == 0 {
			return fmt.Errorf("%w: thread %q", store.ErrNotFound, id)
		}
		return nil
	})
}

// Insert implements store.Backend: the row, its snapshot and (for a first
// row) the thread record go in one transaction, sent as one batch. A seq
// that exists, or a parent that does not, is ErrConflict.
func (b *Backend) Insert(ctx context.Context, r store.Row) error {
	if err := b.writable(); err != nil {
		return err
	}
	if b.group != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		return b.group.insert(r)
	}
	return b.insertOne(ctx, r)
}

// ReadOnly reports whether the backend was opened read-only (an engine
// over it then writes no late snapshots).
func (b *Backend) ReadOnly() bool { return b.readOnly }

// AttachSnapshot implements store.SnapshotAttacher: the row's new
// bookkeeping and its snapshot in one transaction, sent as one batch.
func (b *Backend) AttachSnapshot(ctx context.Context, r store.Row, old uint32) (bool, error) {
	if err := b.writable(); err != nil {
		return false, err
	}
	var ok bool
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE cairn_checkpoints SET has_snapshot = true, base = $1, since = $2, base_size = $3, crc = $4
			WHERE thread = $5 AND ns = $6 AND seq = $7 AND crc = $8`,
			r.Base, r.Since, r.BaseSize, int64(r.Sum), r.Thread, r.Namespace, r.Seq, int64(old))
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		pb := &pgx.Batch{}
		queueSnapshot(pb, r)
		if err := tx.SendBatch(ctx, pb).Close(); err != nil {
			return err
		}
		ok = true
		return nil
	})
	return ok, wrap(err, "attach snapshot", r.Thread)
}

// GroupStats reports what group commit did (zero without it).
func (b *Backend) GroupStats() GroupStats {
	if b.group == nil {
		return GroupStats{}
	}
	b.group.mu.Lock()
	defer b.group.mu.Unlock()
	return b.group.stats
}

// insertOne appends a row in a transaction of its own.
func (b *Backend) insertOne(ctx context.Context, r store.Row) error {
	return wrap(b.insertTx(ctx, r), "insert", r.Thread)
}

func (b *Backend) insertTx(ctx context.Context, r store.Row) error {
	return b.inTx(ctx, "insert", r.Thread, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		create := r.Create != nil && r.Seq == 1
		if create {
			args, err := createArgs(r.Create)
			if err != nil {
				return err
			}
			batch.Queue(createThreadSQL, args...)
		}
		batch.Queue(`INSERT INTO cairn_checkpoints (thread, ns, seq, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch, crc)
			SELECT $1::text, $2::text, $3::bigint, $4::bigint, $5::bigint, $6::bigint, $7::bigint, $8::smallint, $9::bigint, $10::boolean, $11::bytea, $12::bytea, $13::bigint
			WHERE ($4::bigint = 0 OR EXISTS (SELECT 1 FROM cairn_checkpoints WHERE thread = $1::text AND ns = $2::text AND seq = $4::bigint
				AND (base = $5::bigint OR $5::bigint IN ($3::bigint, $4::bigint)) FOR KEY SHARE))
			AND ($14::bigint = 0 OR EXISTS (SELECT 1 FROM cairn_leases WHERE thread = $1::text AND token = $14::bigint FOR SHARE))`,
			r.Thread, r.Namespace, r.Seq, r.Parent, r.Base, r.Since, r.BaseSize, int16(r.Status), r.CreatedAt, r.HasSnapshot, r.Meta, r.Patch, int64(r.Sum), r.Fence)
		if r.HasSnapshot {
			batch.Queue(`INSERT INTO cairn_snapshots (thread, ns, seq, data) VALUES ($1, $2, $3, $4)
				ON CONFLICT (thread, ns, seq) DO UPDATE SET data = EXCLUDED.data`, r.Thread, r.Namespace, r.Seq, r.Snapshot)
		}
		head := queueHead(batch, r)
		res := tx.SendBatch(ctx, batch)
		if create {
			tag, err := res.Exec()
			if err != nil {
				res.Close()
				return wrap(err, "insert", r.Thread)
			}
			if r.NewThread && tag.RowsAffected() == 0 {
				// The transaction rolls back: nothing of the fork is written.
				res.Close()
				return fmt.Errorf("%w: thread %q exists", store.ErrConflict, r.Thread)
			}
		}
		tag, err := res.Exec()
		if err != nil {
			res.Close()
			if isUnique(err) {
				return fmt.Errorf("%w: thread %q namespace %q seq %d exists", store.ErrConflict, r.Thread, r.Namespace, r.Seq)
			}
			return wrap(err, "insert", r.Thread)
		}
		if tag.RowsAffected() == 0 {
			res.Close()
			return b.fencedOr(ctx, r, fmt.Errorf("%w: thread %q namespace %q has no checkpoint %d to extend", store.ErrConflict, r.Thread, r.Namespace, r.Parent))
		}
		if r.HasSnapshot {
			if _, err := res.Exec(); err != nil {
				res.Close()
				return wrap(err, "insert snapshot", r.Thread)
			}
		}
		if head {
			if _, err := res.Exec(); err != nil {
				res.Close()
				return wrap(err, "thread head", r.Thread)
			}
		}
		return res.Close()
	})
}

// Rows implements store.Backend.
func (b *Backend) Rows(ctx context.Context, q store.RowQuery) ([]store.Row, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT seq, parent, base, has_snapshot, since, base_size, status, created_at, meta, patch, crc`)
	sb.WriteString(` FROM cairn_checkpoints WHERE thread = $1 AND ns = $2 AND seq >= $3`)
	args := []any{q.Thread, q.Namespace, q.From}
	if q.To > 0 {
		args = append(args, q.To)
		sb.WriteString(` AND seq <= $4`)
	}
	if q.Desc {
		sb.WriteString(` ORDER BY seq DESC`)
	} else {
		sb.WriteString(` ORDER BY seq`)
	}
	if q.Limit > 0 {
		args = append(args, q.Limit)
		sb.WriteString(` LIMIT $` + strconv.Itoa(len(args)))
	}
	rows, err := b.pool.Query(ctx, sb.String(), args...)
	if err != nil {
		return nil, wrap(err, "checkpoints", q.Thread)
	}
	defer rows.Close()
	var out []store.Row
	for rows.Next() {
		r := store.Row{Thread: q.Thread, Namespace: q.Namespace}
		var status int16
		var sum int64
		if err := rows.Scan(&r.Seq, &r.Parent, &r.Base, &r.HasSnapshot, &r.Since, &r.BaseSize, &status, &r.CreatedAt, &r.Meta, &r.Patch, &sum); err != nil {
			return nil, wrap(err, "checkpoint", q.Thread)
		}
		r.Status = store.Status(status)
		r.Sum = uint32(sum)
		if r.Patch == nil {
			r.Patch = []byte{}
		}
		if int16(r.Status) != status || sum != int64(r.Sum) {
			r.Sum = ^store.RowChecksum(&r) // what was read is not what was written
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(err, "checkpoints", q.Thread)
	}
	if q.Snapshots {
		if err := b.fillSnapshots(ctx, q, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (b *Backend) fillSnapshots(ctx context.Context, q store.RowQuery, out []store.Row) error {
	idx := map[int64]int{}
	var seqs []int64
	for i := range out {
		if out[i].HasSnapshot {
			idx[out[i].Seq] = i
			seqs = append(seqs, out[i].Seq)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	rows, err := b.pool.Query(ctx, `SELECT seq, data FROM cairn_snapshots WHERE thread = $1 AND ns = $2 AND seq = ANY($3)`, q.Thread, q.Namespace, seqs)
	if err != nil {
		return wrap(err, "snapshots", q.Thread)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			return wrap(err, "snapshot", q.Thread)
		}
		out[idx[seq]].Snapshot = data
	}
	return wrap(rows.Err(), "snapshots", q.Thread)
}

// Namespaces implements store.Backend.
func (b *Backend) Namespaces(ctx context.Context, thread string) ([]store.NamespaceRecord, error) {
	rows, err := b.pool.Query(ctx, `SELECT ns, max(seq), count(*) FROM cairn_checkpoints WHERE thread = $1 GROUP BY ns ORDER BY ns COLLATE "C"`, thread)
	if err != nil {
		return nil, wrap(err, "namespaces", thread)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.NamespaceRecord, error) {
		var r store.NamespaceRecord
		err := row.Scan(&r.Name, &r.Head, &r.Count)
		return r, err
	})
	return out, wrap(err, "namespaces", thread)
}

// pruneLockClass is the first key of the advisory lock a prune holds on
// its thread (the second is a hash of the thread's id).
const pruneLockClass = "7262466"

// DeleteRanges implements store.Backend. It checks that the namespace did
// not grow once more after it has locked the rows it rewrites and deletes:
// an insert holds a lock on its parent row until it commits (Insert), so
// one on a parent this prune changes either committed first — and that
// check sees its row — or waits, and then finds its parent changed or
// gone.
func (b *Backend) DeleteRanges(ctx context.Context, thread, ns string, head int64, ranges []store.SeqRange, rebase []store.Rebase) (int64, error) {
	if err := b.writable(); err != nil {
		return 0, err
	}
	var n int64
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		// One prune of a thread at a time: two would lock the rows they
		// change in orders of their own. Not the thread's row: an insert
		// that holds its parent's lock may wait for that one (it moves the
		// head), and this prune for the parent.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+pruneLockClass+`, hashtext($1))`, thread); err != nil {
			return err
		}
		var newest *int64
		if err := tx.QueryRow(ctx, `SELECT max(seq) FROM cairn_checkpoints WHERE thread = $1 AND ns = $2`, thread, ns).Scan(&newest); err != nil {
			return err
		}
		if newest == nil || *newest != head {
			return fmt.Errorf("%w: thread %q namespace %q grew while it was pruned (head %d)", store.ErrConflict, thread, ns, head)
		}
		if err := rebaseRows(ctx, tx, rebase); err != nil {
			return err
		}
		for _, r := range ranges {
			tag, err := tx.Exec(ctx, `DELETE FROM cairn_checkpoints WHERE thread = $1 AND ns = $2 AND seq BETWEEN $3 AND $4`, thread, ns, r.From, r.To)
			if err != nil {
				return err
			}
			n += tag.RowsAffected()
			for _, table := range []string{"cairn_snapshots", "cairn_writes"} {
				if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE thread = $1 AND ns = $2 AND seq BETWEEN $3 AND $4`, thread, ns, r.From, r.To); err != nil {
					return err
				}
			}
		}
		var grew bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM cairn_checkpoints WHERE thread = $1 AND ns = $2 AND seq > $3)`, thread, ns, head).Scan(&grew); err != nil {
			return err
		}
		if grew {
			return fmt.Errorf("%w: thread %q namespace %q grew while it was pruned (head %d)", store.ErrConflict, thread, ns, head)
		}
		if ns == "" {
			_, err := tx.Exec(ctx, emptiedSQL, thread, int16(store.ShardOf(thread, shards)))
			return err
		}
		return nil
	})
	return n, wrap(err, "prune", thread)
}

// rebaseRows rewrites the kept rows of a prune (store.Rebase), inside its
// transaction: a row changed since it was read fails the prune.
func rebaseRows(ctx context.Context, tx pgx.Tx, rebase []store.Rebase) error {
	if len(rebase) == 0 {
		return nil
	}
	// FOR UPDATE, not the update's own lock, which an insert's FOR KEY
	// SHARE on its parent would not hold back.
	seqs := make([]int64, len(rebase))
	for i, rb := range rebase {
		seqs[i] = rb.Row.Seq
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM cairn_checkpoints WHERE thread = $1 AND ns = $2 AND seq = ANY($3) FOR UPDATE`,
		rebase[0].Row.Thread, rebase[0].Row.Namespace, seqs); err != nil {
		return err
	}
	for _, rb := range rebase {
		r := rb.Row
		tag, err := tx.Exec(ctx, `UPDATE cairn_checkpoints SET has_snapshot = $1, base = $2, since = $3, base_size = $4, crc = $5
			WHERE thread = $6 AND ns = $7 AND seq = $8 AND crc = $9`,
			r.HasSnapshot, r.Base, r.Since, r.BaseSize, int64(r.Sum), r.Thread, r.Namespace, r.Seq, int64(rb.Old))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: thread %q namespace %q checkpoint %d changed while it was pruned", store.ErrConflict, r.Thread, r.Namespace, r.Seq)
		}
		if r.HasSnapshot && r.Snapshot != nil {
			if _, err := tx.Exec(ctx, `INSERT INTO cairn_snapshots (thread, ns, seq, data) VALUES ($1, $2, $3, $4)
				ON CONFLICT (thread, ns, seq) DO UPDATE SET data = EXCLUDED.data`, r.Thread, r.Namespace, r.Seq, r.Snapshot); err != nil {
				return err
			}
		}
	}
	return nil
}

// PutWrites implements store.Backend.
func (b *Backend) PutWrites(ctx context.Context, thread, ns string, seq int64, ws []store.Write) error {
	if err := b.writable(); err != nil {
		return err
	}
	return b.inTx(ctx, "pending writes", thread, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM cairn_threads WHERE id = $1)`, thread).Scan(&exists); err != nil {
			return wrap(err, "pending writes", thread)
		}
		if !exists {
			return fmt.Errorf("%w: thread %q", store.ErrNotFound, thread)
		}
		for _, w := range ws {
			if _, err := tx.Exec(ctx, `INSERT INTO cairn_writes (thread, ns, seq, task, node, data) VALUES ($1, $2, $3, $4, $5, $6)
				ON CONFLICT (thread, ns, seq, task) DO UPDATE SET node = EXCLUDED.node, data = EXCLUDED.data`,
				thread, ns, seq, w.Task, w.Node, []byte(w.Update)); err != nil {
				return wrap(err, "pending writes", thread)
			}
		}
		return nil
	})
}

// Writes implements store.Backend.
func (b *Backend) Writes(ctx context.Context, thread, ns string, seq int64) ([]store.Write, error) {
	rows, err := b.pool.Query(ctx, `SELECT task, node, data FROM cairn_writes WHERE thread = $1 AND ns = $2 AND seq = $3 ORDER BY task`, thread, ns, seq)
	if err != nil {
		return nil, wrap(err, "pending writes", thread)
	}
	defer rows.Close()
	var out []store.Write
	for rows.Next() {
		var w store.Write
		var data []byte
		if err := rows.Scan(&w.Task, &w.Node, &data); err != nil {
			return nil, wrap(err, "pending writes", thread)
		}
		w.Update = data
		out = append(out, w)
	}
	return out, wrap(rows.Err(), "pending writes", thread)
}

// Close implements store.Backend.
func (b *Backend) Close() error {
	b.pool.Close()
	return nil
}

var _ store.Backend = (*Backend)(nil)
