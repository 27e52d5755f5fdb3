package inmem

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"sort"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// RewriteRow implements driver.BlobRewriter.
func (b *Backend) RewriteRow(_ context.Context, old, nw driver.Row) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return false, err
	}
	t, ok := b.threads[old.Thread]
	if !ok {
		return false, nil
	}
	rows := t.ns[old.Namespace]
	i := sort.Search(len(rows), func(i int) bool { return rows[i].Seq >= old.Seq })
	if i == len(rows) || rows[i].Seq != old.Seq {
		return false, nil
	}
	r := &rows[i]
	if r.Sum != old.Sum || !bytes.Equal(r.Patch, old.Patch) || (nw.Snapshot != nil && !bytes.Equal(r.Snapshot, old.Snapshot)) {
		return false, nil
	}
	r.Meta, r.Patch, r.BaseSize, r.Sum = bytes.Clone(nw.Meta), bytes.Clone(nw.Patch), nw.BaseSize, nw.Sum
	if nw.Snapshot != nil {
		r.Snapshot = bytes.Clone(nw.Snapshot)
	}
	return true, nil
}

// ThreadWrites implements driver.BlobRewriter.
func (b *Backend) ThreadWrites(_ context.Context, id string) ([]driver.StoredWrite, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return nil, err
	}
	t, ok := b.threads[id]
	if !ok {
		return nil, nil
	}
	var out []driver.StoredWrite
	for k, ws := range t.writes {
		for _, w := range ws {
			out = append(out, driver.StoredWrite{Thread: id, Namespace: k.ns, Seq: k.seq, Task: w.Task, Data: bytes.Clone(w.Update)})
		}
	}
	return out, nil
}

// RewriteWrite implements driver.BlobRewriter.
func (b *Backend) RewriteWrite(_ context.Context, w driver.StoredWrite, nw []byte) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return false, err
	}
	t, ok := b.threads[w.Thread]
	if !ok {
		return false, nil
	}
	ws := t.writes[writeKey{w.Namespace, w.Seq}]
	i := slices.IndexFunc(ws, func(x store.Write) bool { return x.Task == w.Task })
	if i < 0 || !bytes.Equal(ws[i].Update, w.Data) {
		return false, nil
	}
	ws[i].Update = bytes.Clone(nw)
	return true, nil
}

// RewriteRun implements driver.BlobRewriter.
func (b *Backend) RewriteRun(_ context.Context, id string, old, nw []byte) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return false, err
	}
	r, ok := b.runs[id]
	if !ok || !bytes.Equal(r.rec.Data, old) {
		return false, nil
	}
	r.rec.Data = bytes.Clone(nw)
	return true, nil
}

// RewriteEvent implements driver.BlobRewriter.
func (b *Backend) RewriteEvent(_ context.Context, run string, seq int64, old, nw []byte) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return false, err
	}
	r, ok := b.runs[run]
	if !ok {
		return false, nil
	}
	i := slices.IndexFunc(r.events, func(ev store.EventRecord) bool { return ev.Seq == seq })
	if i < 0 || !bytes.Equal(r.events[i].Data, old) {
		return false, nil
	}
	// Readers may hold the slice: replace it.
	evs := slices.Clone(r.events)
	evs[i].Data = bytes.Clone(nw)
	r.events = evs
	return true, nil
}

var _ driver.BlobRewriter = (*Backend)(nil)

// StoredItems implements driver.ItemRewriter.
func (b *Backend) StoredItems(_ context.Context, after driver.ItemKey, limit int) ([]driver.ItemRow, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return nil, err
	}
	keys := make([]driver.ItemKey, 0, len(b.items))
	for k := range b.items {
		if compareItemKeys(k, after) > 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareItemKeys)
	out := make([]driver.ItemRow, 0, min(limit, len(keys)))
	for _, k := range keys[:min(limit, len(keys))] {
		out = append(out, driver.ItemRow{ItemKey: k, Value: bytes.Clone(b.items[k].row.Value)})
	}
	return out, nil
}

func compareItemKeys(a, b driver.ItemKey) int {
	return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Key, b.Key))
}

// RewriteItem implements driver.ItemRewriter.
func (b *Backend) RewriteItem(_ context.Context, k driver.ItemKey, old, nw []byte) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return false, err
	}
	r, ok := b.items[k]
	if !ok || !bytes.Equal(r.row.Value, old) {
		return false, nil
	}
	r.row.Value = bytes.Clone(nw)
	return true, nil
}

var _ driver.ItemRewriter = (*Backend)(nil)
