package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// The layout: numbered migrations (migrations/NNNN_name.sql, each
// perhaps followed by a Go step) and the baseline a new store is made
// from (schema.sql, the same layout at once). The store's format version
// (PRAGMA user_version) is the number of its last migration. Version 2
// adds a checksum (crc) to every thread and checkpoint row; version 3 the
// HTTP server's runs and their event logs; version 4 the long-term memory
// store's items and their full-text index; version 5 keys checkpoint rows
// by lane (a thread namespace's number) and seq in one integer; version
// 6 adds the thread index (threadindex.go); version 7 keeps each tenant's
// thread under its key, tenant/id (tenantkeys.go); version 8 each
// checkpoint row's external id, indexed (externalid.go).
var (
	//go:embed migrations/*.sql
	migrationFiles embed.FS
	//go:embed schema.sql
	baseline string

	migrations = driver.MustLoadMigrations(migrationFiles, "migrations", map[int]string{
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
		if err := b.applyOnly(ctx, 7); err != nil {
			return err
		}
	}
	// The baseline has no external ids: a crash of an older Cairn may
	// have left a checkpoints table the baseline does not replace.
	return b.applyOnly(ctx, 8)
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
		var page []driver.ThreadRecord
		for rows.Next() {
			var t driver.ThreadRecord
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
			if _, err := b.conn.ExecContext(ctx, `UPDATE threads SET crc = ? WHERE id = ?`, int64(driver.ThreadChecksum(&page[i])), page[i].ID); err != nil {
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
	var last driver.Row
	for {
		rows, err := b.conn.QueryContext(ctx, `SELECT thread, ns, seq, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch
			FROM checkpoints WHERE (thread, ns, seq) > (?, ?, ?) ORDER BY thread, ns, seq LIMIT ?`, last.Thread, last.Namespace, last.Seq, upgradePage)
		if err != nil {
			return err
		}
		var page []driver.Row
		for rows.Next() {
			var r driver.Row
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
			if _, err := b.conn.ExecContext(ctx, `UPDATE checkpoints SET crc = ? WHERE thread = ? AND ns = ? AND seq = ?`, int64(driver.RowChecksum(r)), r.Thread, r.Namespace, r.Seq); err != nil {
				return err
			}
		}
		if len(page) < upgradePage {
			return nil
		}
		last = page[len(page)-1]
	}
}
