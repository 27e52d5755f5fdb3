package inmem

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

var _ driver.ThreadLoader = (*Backend)(nil)

// LoadThread implements driver.ThreadLoader: everything is checked, then
// written under the lock, so that no reader sees a part of the thread.
func (b *Backend) LoadThread(_ context.Context, t driver.ThreadLoad) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	if _, ok := b.threads[t.Thread.ID]; ok {
		return fmt.Errorf("%w: thread %q exists", store.ErrConflict, t.Thread.ID)
	}
	for _, r := range t.Runs {
		if _, ok := b.runs[r.ID]; ok {
			return fmt.Errorf("%w: run %q exists", store.ErrConflict, r.ID)
		}
	}
	rec := t.Thread
	rec.Metadata = bytes.Clone(rec.Metadata)
	th := &thread{rec: rec, ns: map[string][]driver.Row{}, writes: map[writeKey][]store.Write{}}
	var head *driver.HeadUpdate
	var headAt int64
	for _, r := range t.Rows {
		r.Meta, r.Patch, r.Snapshot = bytes.Clone(r.Meta), bytes.Clone(r.Patch), bytes.Clone(r.Snapshot)
		if r.Head != nil && r.Namespace == "" {
			head, headAt = r.Head, r.CreatedAt
		}
		r.Create, r.NewThread, r.Fence, r.Head = nil, false, 0, nil
		th.ns[r.Namespace] = append(th.ns[r.Namespace], r)
	}
	for _, rw := range t.Writes {
		ws := make([]store.Write, len(rw.Writes))
		for i, w := range rw.Writes {
			w.Update = bytes.Clone(w.Update)
			ws[i] = w
		}
		th.writes[writeKey{rw.Namespace, rw.Seq}] = ws
	}
	b.threads[rec.ID] = th
	b.idx.add(th)
	if head != nil {
		b.idx.setStatus(th, head.Status, headAt)
	}
	for _, lr := range t.Runs {
		r := &run{rec: store.RunRecord{ID: lr.ID, Thread: rec.ID, Tenant: rec.Tenant, Status: lr.Status, CreatedAt: lr.CreatedAt, UpdatedAt: lr.UpdatedAt, Data: bytes.Clone(lr.Data)}}
		for _, ev := range lr.Events {
			r.events = append(r.events, store.EventRecord{Seq: ev.Seq, Data: bytes.Clone(ev.Data)})
		}
		b.runs[lr.ID] = r
	}
	return nil
}
