package inmem

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/cairn-dev/cairn/store"
)

type run struct {
	rec    store.RunRecord
	events []store.EventRecord // ascending by seq
}

func cloneRun(r store.RunRecord) store.RunRecord {
	r.Data = bytes.Clone(r.Data)
	return r
}

// PutRun implements store.RunLog.
func (b *Backend) PutRun(_ context.Context, r store.RunRecord) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	if old, ok := b.runs[r.ID]; ok {
		old.rec = cloneRun(r)
		return nil
	}
	b.runs[r.ID] = &run{rec: cloneRun(r)}
	return nil
}

// Run implements store.RunLog.
func (b *Backend) Run(_ context.Context, id string) (store.RunRecord, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return store.RunRecord{}, err
	}
	r, ok := b.runs[id]
	if !ok {
		return store.RunRecord{}, fmt.Errorf("%w: run %q", store.ErrNotFound, id)
	}
	return cloneRun(r.rec), nil
}

// Runs implements store.RunLog.
func (b *Backend) Runs(_ context.Context, q store.RunQuery) ([]store.RunRecord, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return nil, err
	}
	var out []store.RunRecord
	for _, r := range b.runs {
		if (q.Tenant != "" && r.rec.Tenant != q.Tenant) || (q.Thread != "" && r.rec.Thread != q.Thread) {
			continue
		}
		if len(q.Status) > 0 && !slices.Contains(q.Status, r.rec.Status) {
			continue
		}
		out = append(out, cloneRun(r.rec))
	}
	slices.SortFunc(out, func(a, b store.RunRecord) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	out = out[min(q.Offset, len(out)):]
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// DeleteRun implements store.RunLog.
func (b *Backend) DeleteRun(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	if _, ok := b.runs[id]; !ok {
		return fmt.Errorf("%w: run %q", store.ErrNotFound, id)
	}
	delete(b.runs, id)
	return nil
}

// AppendEvents implements store.RunLog.
func (b *Backend) AppendEvents(_ context.Context, id string, evs []store.EventRecord) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.storedRun(id)
	if err != nil {
		return err
	}
	merged := slices.Clone(r.events)
	for _, ev := range evs {
		i, found := slices.BinarySearchFunc(merged, ev.Seq, func(e store.EventRecord, seq int64) int { return cmp.Compare(e.Seq, seq) })
		if found {
			return fmt.Errorf("%w: event %d of run %q exists", store.ErrConflict, ev.Seq, id)
		}
		merged = slices.Insert(merged, i, store.EventRecord{Seq: ev.Seq, Data: bytes.Clone(ev.Data)})
	}
	r.events = merged
	return nil
}

// Events implements store.RunLog.
func (b *Backend) Events(_ context.Context, id string, after int64, limit int) ([]store.EventRecord, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return nil, err
	}
	r, ok := b.runs[id]
	if !ok {
		return nil, fmt.Errorf("%w: run %q", store.ErrNotFound, id)
	}
	var out []store.EventRecord
	for _, ev := range r.events {
		if ev.Seq > after {
			out = append(out, store.EventRecord{Seq: ev.Seq, Data: bytes.Clone(ev.Data)})
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

// run returns a stored run; ErrNotFound. The caller holds b.mu.
func (b *Backend) storedRun(id string) (*run, error) {
	if err := b.live(); err != nil {
		return nil, err
	}
	r, ok := b.runs[id]
	if !ok {
		return nil, fmt.Errorf("%w: run %q", store.ErrNotFound, id)
	}
	return r, nil
}

// DeleteEvents implements store.RunLog.
func (b *Backend) DeleteEvents(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.storedRun(id)
	if err != nil {
		return err
	}
	r.events = nil
	return nil
}

// TrimEvents implements store.RunLog.
func (b *Backend) TrimEvents(_ context.Context, endedBefore int64) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return 0, err
	}
	var n int64
	for _, r := range b.runs {
		if len(r.events) > 0 && store.RunEnded(r.rec.Status) && r.rec.UpdatedAt < endedBefore {
			r.events = nil
			n++
		}
	}
	return n, nil
}

var _ store.RunLog = (*Backend)(nil)
