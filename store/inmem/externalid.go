package inmem

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/store"
)

// ExternalSeq implements driver.ExternalIDIndex. The rows are in memory:
// it looks at them newest first, without a copy.
func (b *Backend) ExternalSeq(_ context.Context, thread, ns, id string) (int64, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return 0, err
	}
	rows := b.threads[thread].rows(ns)
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].ExternalID == id {
			return rows[i].Seq, nil
		}
	}
	return 0, fmt.Errorf("%w: thread %q namespace %q has no checkpoint of external id %q", store.ErrNotFound, thread, ns, id)
}
