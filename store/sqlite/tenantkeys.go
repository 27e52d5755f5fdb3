package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// Migration 7 keeps each tenant's thread under its key, tenant/id
// (migrations/0007_tenant_keys.sql). The SQL renames; the Go steps around
// it refuse a rename onto a thread that exists, and give the renamed
// threads and rows the checksums of their new names.

// checkTenantKeys refuses to migrate a file where a tenant's thread kept
// under its bare id would take a key another thread has already (a
// thread written under its key by a Cairn of format 6).
func (b *Backend) checkTenantKeys(ctx context.Context) error {
	var id, tenant string
	err := b.conn.QueryRowContext(ctx, `SELECT t.id, t.tenant FROM threads t JOIN threads k ON k.id = t.tenant || '/' || t.id
		WHERE t.tenant <> '' AND instr(t.id, '/') = 0 LIMIT 1`).Scan(&id, &tenant)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return driver.KeyTakenError(tenant, id)
}

// keyed is a thread migration 7 renamed.
type keyed struct{ old, new string }

// sumKeyed gives every thread migration 7 renamed, and each of its
// checkpoint rows, the checksum of its new name, then drops the list of
// renamed threads.
func (b *Backend) sumKeyed(ctx context.Context) error {
	for after := ""; ; {
		page, err := b.keyedPage(ctx, after)
		if err != nil {
			return err
		}
		for _, k := range page {
			if err := b.sumKeyedThread(ctx, k); err != nil {
				return fmt.Errorf("thread %q: %w", k.new, err)
			}
		}
		if len(page) < upgradePage {
			break
		}
		after = page[len(page)-1].new
	}
	_, err := b.conn.ExecContext(ctx, `DROP TABLE temp.tenant_keys`)
	return err
}

func (b *Backend) keyedPage(ctx context.Context, after string) ([]keyed, error) {
	rows, err := b.conn.QueryContext(ctx, `SELECT old, new FROM temp.tenant_keys WHERE new > ? ORDER BY new LIMIT ?`, after, upgradePage)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []keyed
	for rows.Next() {
		var k keyed
		if err := rows.Scan(&k.old, &k.new); err != nil {
			return nil, err
		}
		page = append(page, k)
	}
	return page, rows.Err()
}

// sumKeyedThread moves the checksums of a renamed thread's record and
// rows to its new name.
func (b *Backend) sumKeyedThread(ctx context.Context, k keyed) error {
	t := driver.ThreadRecord{ID: k.new}
	var sum int64
	if err := b.conn.QueryRowContext(ctx, `SELECT tenant, metadata, created_at, crc FROM threads WHERE id = ?`, k.new).Scan(&t.Tenant, &t.Metadata, &t.CreatedAt, &sum); err != nil {
		return err
	}
	if sum == int64(uint32(sum)) { // else it is damaged, and stays so
		if _, err := b.conn.ExecContext(ctx, `UPDATE threads SET crc = ? WHERE id = ?`, int64(driver.MovedThreadChecksum(&t, k.old, uint32(sum))), k.new); err != nil {
			return err
		}
	}
	lanes, err := b.threadLanes(ctx, k.new)
	if err != nil {
		return err
	}
	for _, l := range lanes {
		if err := b.sumKeyedLane(ctx, k, l); err != nil {
			return err
		}
	}
	return nil
}

// lane is a thread namespace's lane.
type lane struct {
	id int64
	ns string
}

func (b *Backend) threadLanes(ctx context.Context, thread string) ([]lane, error) {
	rows, err := b.conn.QueryContext(ctx, `SELECT id, ns FROM lanes WHERE thread = ? ORDER BY id`, thread)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []lane
	for rows.Next() {
		var l lane
		if err := rows.Scan(&l.id, &l.ns); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// sumKeyedLane moves the checksums of a lane's rows, a page at a time.
func (b *Backend) sumKeyedLane(ctx context.Context, k keyed, l lane) error {
	first, last := l.id<<32+1, l.id<<32+maxSeq
	for {
		page, err := b.lanePage(ctx, k.new, l, first, last)
		if err != nil {
			return err
		}
		for _, r := range page {
			if r.sum != int64(uint32(r.sum)) {
				continue // damaged, and stays so
			}
			sum := driver.MovedRowChecksum(&r.row, k.old, uint32(r.sum))
			if _, err := b.conn.ExecContext(ctx, `UPDATE checkpoints SET crc = ? WHERE id = ?`, int64(sum), r.id); err != nil {
				return err
			}
		}
		if len(page) < upgradePage {
			return nil
		}
		first = page[len(page)-1].id + 1
	}
}

// storedRow is a checkpoint row as the file keeps it: its key, the row as
// Rows reads it, and its stored checksum.
type storedRow struct {
	id  int64
	row driver.Row
	sum int64
}

func (b *Backend) lanePage(ctx context.Context, thread string, l lane, first, last int64) ([]storedRow, error) {
	rows, err := b.conn.QueryContext(ctx, `SELECT id, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch, crc
		FROM checkpoints WHERE id BETWEEN ? AND ? ORDER BY id LIMIT ?`, first, last, upgradePage)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []storedRow
	for rows.Next() {
		sr := storedRow{row: driver.Row{Thread: thread, Namespace: l.ns}}
		r := &sr.row
		var status, has int64
		if err := rows.Scan(&sr.id, &r.Parent, &r.Base, &r.Since, &r.BaseSize, &status, &r.CreatedAt, &has, &r.Meta, &r.Patch, &sr.sum); err != nil {
			return nil, err
		}
		r.Seq = sr.id - l.id<<32
		r.Status, r.HasSnapshot = store.Status(status), has == 1
		page = append(page, sr)
	}
	return page, rows.Err()
}
