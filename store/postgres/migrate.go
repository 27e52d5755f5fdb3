package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/jackc/pgx/v5"
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

	migrations = driver.MustLoadMigrations(migrationFiles, "migrations", map[int]string{
		2: "computes the checksum of every thread and checkpoint row",
		6: "fills the thread index: each thread's status and touch time from its head, its metadata entries, the counters",
		7: "refuses a thread whose key another thread has, before the rows are renamed; gives each renamed thread and checkpoint row the checksum of its new name, and moves its counts to the shard of its new name",
	})
	// formatVersion is the layout this code writes.
	formatVersion = store.Latest(migrations)
)

// tables are the tables of a Cairn store besides cairn_format.
var tables = []string{"cairn_threads", "cairn_checkpoints", "cairn_snapshots", "cairn_writes", "cairn_runs", "cairn_run_events", "cairn_api_keys", "cairn_leases", "cairn_items", "cairn_thread_meta", "cairn_thread_counts", "cairn_thread_totals"}

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
	var threads []driver.ThreadRecord
	for rows.Next() {
		var t driver.ThreadRecord
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
		if _, err := tx.Exec(ctx, `UPDATE threads SET crc = $1 WHERE id = $2`, int64(driver.ThreadChecksum(&threads[i])), threads[i].ID); err != nil {
			return err
		}
	}
	return sumCheckpoints(ctx, tx)
}

func sumCheckpoints(ctx context.Context, tx pgx.Tx) error {
	var last driver.Row
	for {
		rows, err := tx.Query(ctx, `SELECT thread, ns, seq, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch
			FROM checkpoints WHERE (thread, ns, seq) > ($1, $2, $3) ORDER BY thread, ns, seq LIMIT 512`, last.Thread, last.Namespace, last.Seq)
		if err != nil {
			return err
		}
		var page []driver.Row
		for rows.Next() {
			var r driver.Row
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
			batch.Queue(`UPDATE checkpoints SET crc = $1 WHERE thread = $2 AND ns = $3 AND seq = $4`, int64(driver.RowChecksum(r)), r.Thread, r.Namespace, r.Seq)
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
