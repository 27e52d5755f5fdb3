package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// Migration 7 keeps each tenant's thread under its key, tenant/id
// (migrations/0007_tenant_keys.sql). The SQL renames; the Go steps around
// it refuse a rename onto a thread that exists, give the renamed threads
// and rows the checksums of their new names, and move their counts to the
// shards of their new names (a thread's counters are kept in the shard
// its id gives, driver.ShardOf).

// keyPage is how many renamed threads, and how many rows of one, a Go
// step of migration 7 reads at a time.
const keyPage = 512

// checkTenantKeys refuses to migrate a store where a tenant's thread kept
// under its bare id would take a key another thread has already (a
// thread written under its key by a Cairn of format 6).
func checkTenantKeys(ctx context.Context, tx pgx.Tx) error {
	var id, tenant string
	err := tx.QueryRow(ctx, `SELECT t.id, t.tenant FROM cairn_threads t JOIN cairn_threads k ON k.id = t.tenant || '/' || t.id
		WHERE t.tenant <> '' AND strpos(t.id, '/') = 0 LIMIT 1`).Scan(&id, &tenant)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return driver.KeyTakenError(tenant, id)
}

// keyed is a thread migration 7 renamed.
type keyed struct{ old, new string }

// shardMoves are the count changes of threads that moved to another
// shard: by counter, what to add.
type shardMoves struct {
	totals map[totalKey]int64
	counts map[countKey]int64
}

type totalKey struct {
	tenant string
	status int16
	shard  int16
}

type countKey struct {
	tenant, key, value string
	shard              int16
}

// sumKeyed gives every thread migration 7 renamed, and each of its
// checkpoint rows, the checksum of its new name, and moves its counts to
// its new shard.
func sumKeyed(ctx context.Context, tx pgx.Tx) error {
	mv := shardMoves{totals: map[totalKey]int64{}, counts: map[countKey]int64{}}
	for after := ""; ; {
		page, err := keyedPage(ctx, tx, after)
		if err != nil {
			return err
		}
		for _, k := range page {
			if err := sumKeyedThread(ctx, tx, k, &mv); err != nil {
				return fmt.Errorf("thread %q: %w", k.new, err)
			}
		}
		if len(page) < keyPage {
			break
		}
		after = page[len(page)-1].new
	}
	return mv.apply(ctx, tx)
}

func keyedPage(ctx context.Context, tx pgx.Tx, after string) ([]keyed, error) {
	rows, err := tx.Query(ctx, `SELECT old, new FROM cairn_tenant_keys WHERE new > $1 ORDER BY new LIMIT $2`, after, keyPage)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (keyed, error) {
		var k keyed
		err := row.Scan(&k.old, &k.new)
		return k, err
	})
}

// sumKeyedThread moves the checksums of a renamed thread's record and
// rows to its new name, and notes its moves between shards.
func sumKeyedThread(ctx context.Context, tx pgx.Tx, k keyed, mv *shardMoves) error {
	t := driver.ThreadRecord{ID: k.new}
	var meta *string
	var sum int64
	var status int16
	if err := tx.QueryRow(ctx, `SELECT tenant, metadata::text, created_at, crc, status FROM cairn_threads WHERE id = $1`, k.new).Scan(&t.Tenant, &meta, &t.CreatedAt, &sum, &status); err != nil {
		return err
	}
	if meta != nil {
		t.Metadata = []byte(*meta)
	}
	if sum == int64(uint32(sum)) { // else it is damaged, and stays so
		if _, err := tx.Exec(ctx, `UPDATE cairn_threads SET crc = $1 WHERE id = $2`, int64(driver.MovedThreadChecksum(&t, k.old, uint32(sum))), k.new); err != nil {
			return err
		}
	}
	if err := mv.note(t, k.old, status); err != nil {
		return err
	}
	return sumKeyedRows(ctx, tx, k)
}

// note records a renamed thread's counts moving from the shard of its
// old name to that of its new one.
func (mv *shardMoves) note(t driver.ThreadRecord, old string, status int16) error {
	from, to := int16(driver.ShardOf(old, shards)), int16(driver.ShardOf(t.ID, shards))
	if from == to {
		return nil
	}
	entries, err := driver.IndexEntries(t.Metadata)
	if err != nil {
		return err
	}
	mv.totals[totalKey{t.Tenant, status, from}]--
	mv.totals[totalKey{t.Tenant, status, to}]++
	for _, e := range entries {
		mv.counts[countKey{t.Tenant, e.Key, e.Value, from}]--
		mv.counts[countKey{t.Tenant, e.Key, e.Value, to}]++
	}
	return nil
}

// apply adds the moves to the counters, and drops the metadata counters
// left at zero.
func (mv *shardMoves) apply(ctx context.Context, tx pgx.Tx) error {
	batch := &pgx.Batch{}
	for k, n := range mv.totals {
		batch.Queue(`INSERT INTO cairn_thread_totals (tenant, status, shard, n) VALUES ($1, $2, $3, $4)
			ON CONFLICT (tenant, status, shard) DO UPDATE SET n = cairn_thread_totals.n + EXCLUDED.n`, k.tenant, k.status, k.shard, n)
	}
	for k, n := range mv.counts {
		batch.Queue(`INSERT INTO cairn_thread_counts (tenant, key, value, shard, n) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (tenant, key, value, shard) DO UPDATE SET n = cairn_thread_counts.n + EXCLUDED.n`, k.tenant, k.key, k.value, k.shard, n)
	}
	batch.Queue(`DELETE FROM cairn_thread_counts WHERE n <= 0`)
	return tx.SendBatch(ctx, batch).Close()
}

// sumKeyedRows moves the checksums of a renamed thread's checkpoint rows
// to its new name, a page at a time.
func sumKeyedRows(ctx context.Context, tx pgx.Tx, k keyed) error {
	last := driver.Row{Thread: k.new}
	for {
		page, sums, err := keyedRows(ctx, tx, last)
		if err != nil {
			return err
		}
		batch := &pgx.Batch{}
		for i := range page {
			r := &page[i]
			if sums[i] != int64(uint32(sums[i])) {
				continue // damaged, and stays so
			}
			batch.Queue(`UPDATE cairn_checkpoints SET crc = $1 WHERE thread = $2 AND ns = $3 AND seq = $4`,
				int64(driver.MovedRowChecksum(r, k.old, uint32(sums[i]))), r.Thread, r.Namespace, r.Seq)
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		if len(page) < keyPage {
			return nil
		}
		last = page[len(page)-1]
	}
}

// keyedRows reads the page of a thread's checkpoint rows after last, as
// Rows reads them, with their stored checksums.
func keyedRows(ctx context.Context, tx pgx.Tx, last driver.Row) ([]driver.Row, []int64, error) {
	rows, err := tx.Query(ctx, `SELECT ns, seq, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch, crc
		FROM cairn_checkpoints WHERE thread = $1 AND (ns, seq) > ($2, $3) ORDER BY ns, seq LIMIT $4`, last.Thread, last.Namespace, last.Seq, keyPage)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var page []driver.Row
	var sums []int64
	for rows.Next() {
		r := driver.Row{Thread: last.Thread}
		var status int16
		var sum int64
		if err := rows.Scan(&r.Namespace, &r.Seq, &r.Parent, &r.Base, &r.Since, &r.BaseSize, &status, &r.CreatedAt, &r.HasSnapshot, &r.Meta, &r.Patch, &sum); err != nil {
			return nil, nil, err
		}
		r.Status = store.Status(status)
		page, sums = append(page, r), append(sums, sum)
	}
	return page, sums, rows.Err()
}
