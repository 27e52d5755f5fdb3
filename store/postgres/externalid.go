package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/store"
)

// ExternalSeq implements driver.ExternalIDIndex, through the index
// cairn_checkpoints_ext_id of format 8.
func (b *Backend) ExternalSeq(ctx context.Context, thread, ns, id string) (int64, error) {
	var seq int64
	err := b.pool.QueryRow(ctx, `SELECT seq FROM cairn_checkpoints WHERE thread = $1 AND ns = $2 AND ext_id = $3
		ORDER BY seq DESC LIMIT 1`, thread, ns, id).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: thread %q namespace %q has no checkpoint of external id %q", store.ErrNotFound, thread, ns, id)
	}
	if err != nil {
		return 0, wrap(err, "checkpoints", thread)
	}
	return seq, nil
}
