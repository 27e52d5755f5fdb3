package sqlite

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/store"
)

// externalSeqQuery finds the newest row of a lane with an external id,
// through the index checkpoints_ext_id (ext_id, id) of format 8.
const externalSeqQuery = `SELECT c.id - (l.id << 32) FROM lanes l JOIN checkpoints c
	ON c.ext_id = ?1 AND c.id BETWEEN (l.id << 32) + 1 AND (l.id << 32) + 4294967295
	WHERE l.thread = ?2 AND l.ns = ?3 ORDER BY c.id DESC LIMIT 1`

// ExternalSeq implements driver.ExternalIDIndex.
func (b *Backend) ExternalSeq(ctx context.Context, thread, ns, id string) (int64, error) {
	if b.noExtIDs {
		return 0, fmt.Errorf("%w: %s is of a format before 8, which keeps no external ids (cairn migrate up)", store.ErrUnsupportedFormat, b.path)
	}
	rows, err := b.query(ctx, externalSeqQuery, id, thread, ns)
	if err != nil {
		return 0, b.readErr(err, thread, ns, 0, "checkpoints")
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, b.readErr(err, thread, ns, 0, "checkpoints")
		}
		return 0, fmt.Errorf("%w: thread %q namespace %q has no checkpoint of external id %q", store.ErrNotFound, thread, ns, id)
	}
	var seq int64
	if err := rows.Scan(&seq); err != nil {
		return 0, b.readErr(err, thread, ns, 0, "checkpoints")
	}
	return seq, nil
}

// nullString is s, or NULL when empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// newStoreSQL is what a new store is made of (store.MigratingDriver's
// baseline): schema.sql, then migration 8, which create applies after
// it (a checkpoints table a crash of an older Cairn left, keyed by
// thread, ns and seq, cannot take format 8's index before migration 5
// rebuilds it).
func newStoreSQL() string {
	for _, m := range migrations {
		if m.Version == 8 {
			return baseline + "\n" + m.SQL
		}
	}
	return baseline
}
