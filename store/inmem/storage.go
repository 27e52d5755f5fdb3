package inmem

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// ThreadUsage implements driver.StorageBackend: the lengths of a thread's
// pending writes' updates, its runs' records and their events' data.
func (b *Backend) ThreadUsage(_ context.Context, thread string) (driver.ThreadUsage, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return driver.ThreadUsage{}, err
	}
	t, ok := b.threads[thread]
	if !ok {
		return driver.ThreadUsage{}, fmt.Errorf("%w: thread %q", store.ErrNotFound, thread)
	}
	u := driver.ThreadUsage{PendingWrites: map[string]store.StoredRows{}}
	for k, ws := range t.writes {
		if len(ws) == 0 {
			continue
		}
		w := u.PendingWrites[k.ns]
		for _, x := range ws {
			w.Count++
			w.Bytes += int64(len(x.Update))
		}
		u.PendingWrites[k.ns] = w
	}
	// Runs are kept by id, not by thread: a diagnostic may look at them
	// all.
	for _, r := range b.runs {
		if r.rec.Thread != thread {
			continue
		}
		u.Runs.Count++
		u.Runs.Bytes += int64(len(r.rec.Data))
		for _, ev := range r.events {
			u.RunEvents.Count++
			u.RunEvents.Bytes += int64(len(ev.Data))
		}
	}
	return u, nil
}

var _ driver.StorageBackend = (*Backend)(nil)
