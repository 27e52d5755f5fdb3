package inmem

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// Backend keeps rows in maps guarded by one lock.
type Backend struct {
	mu      sync.RWMutex
	closed  bool
	threads map[string]*thread
	runs    map[string]*run
	keys    map[string]store.KeyRecord
	leases  map[string]store.Lease
	items   map[driver.ItemKey]*itemRow // made on the first put
	idx     threadIndex
}

type thread struct {
	rec    driver.ThreadRecord
	ns     map[string][]driver.Row // ascending by seq (pruning leaves gaps)
	writes map[writeKey][]store.Write
	// entries are the thread's metadata index entries; statusAt the time
	// its status was set (0 while idle).
	entries  []driver.MetaEntry
	statusAt int64
}

type writeKey struct {
	ns  string
	seq int64
}

// New returns an empty backend.
func New() *Backend {
	return &Backend{threads: map[string]*thread{}, runs: map[string]*run{}, keys: map[string]store.KeyRecord{}, leases: map[string]store.Lease{}, idx: newThreadIndex()}
}

// Open returns a store over a new in-memory backend.
func Open(opts store.Options) *store.Engine { return store.New(New(), opts) }

func (b *Backend) live() error {
	if b.closed {
		return store.ErrClosed
	}
	return nil
}

// CreateThread implements driver.Backend.
func (b *Backend) CreateThread(_ context.Context, t driver.ThreadRecord) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	if _, ok := b.threads[t.ID]; ok {
		return fmt.Errorf("%w: thread %q exists", store.ErrConflict, t.ID)
	}
	t.Metadata = bytes.Clone(t.Metadata)
	th := &thread{rec: t, ns: map[string][]driver.Row{}, writes: map[writeKey][]store.Write{}}
	b.threads[t.ID] = th
	b.idx.add(th)
	return nil
}

func (b *Backend) record(t *thread) driver.ThreadRecord {
	rec := t.rec
	rec.Metadata = bytes.Clone(rec.Metadata)
	if rows := t.ns[""]; len(rows) > 0 {
		rec.Head, rec.HeadAt = rows[len(rows)-1].Seq, rows[len(rows)-1].CreatedAt
	}
	return rec
}

// Thread implements driver.Backend.
func (b *Backend) Thread(_ context.Context, id string) (driver.ThreadRecord, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return driver.ThreadRecord{}, err
	}
	t, ok := b.threads[id]
	if !ok {
		return driver.ThreadRecord{}, fmt.Errorf("%w: thread %q", store.ErrNotFound, id)
	}
	return b.record(t), nil
}

// Threads implements driver.Backend.
func (b *Backend) Threads(_ context.Context, q driver.ThreadQuery) ([]driver.ThreadRecord, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(b.threads))
	for id := range b.threads {
		if id > q.After {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var out []driver.ThreadRecord
	for _, id := range ids {
		t := b.threads[id]
		if q.Tenant != "" && t.rec.Tenant != q.Tenant {
			continue
		}
		if !matches(&driver.ListQuery{AllTenants: true, Meta: q.Meta}, t, nil, nil) {
			continue
		}
		out = append(out, b.record(t))
		if q.Limit > 0 && len(out) >= q.Limit {
			break
		}
	}
	return out, nil
}

// DeleteThread implements driver.Backend.
func (b *Backend) DeleteThread(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	t, ok := b.threads[id]
	if !ok {
		return fmt.Errorf("%w: thread %q", store.ErrNotFound, id)
	}
	b.idx.remove(t)
	delete(b.threads, id)
	for rid, r := range b.runs {
		if r.rec.Thread == id {
			delete(b.runs, rid)
		}
	}
	return nil
}

// UpdateThread implements driver.Backend.
func (b *Backend) UpdateThread(_ context.Context, rec driver.ThreadRecord) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	t, ok := b.threads[rec.ID]
	if !ok {
		return fmt.Errorf("%w: thread %q", store.ErrNotFound, rec.ID)
	}
	b.idx.remove(t)
	t.rec.Metadata, t.rec.Sum = bytes.Clone(rec.Metadata), rec.Sum
	b.idx.add(t)
	return nil
}

// Insert implements driver.Backend.
func (b *Backend) Insert(_ context.Context, r driver.Row) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	if err := b.fenced(r); err != nil {
		return err
	}
	t, ok := b.threads[r.Thread]
	if ok && r.NewThread {
		return fmt.Errorf("%w: thread %q exists", store.ErrConflict, r.Thread)
	}
	rows := t.rows(r.Namespace)
	next := int64(1)
	if len(rows) > 0 {
		next = rows[len(rows)-1].Seq + 1
	}
	if r.Seq < next {
		return fmt.Errorf("%w: seq %d exists", store.ErrConflict, r.Seq)
	}
	if r.Parent > 0 {
		i, found := seqIndex(rows, r.Parent)
		if !found || !driver.BaseFits(&r, rows[i].Base) {
			return fmt.Errorf("%w: thread %q namespace %q has no checkpoint %d to extend (as the writer knows it)", store.ErrConflict, r.Thread, r.Namespace, r.Parent)
		}
	}
	if !ok {
		if r.Create == nil {
			return fmt.Errorf("%w: thread %q does not exist and the row creates none", store.ErrInvalidArgument, r.Thread)
		}
		rec := *r.Create
		rec.Metadata = bytes.Clone(rec.Metadata)
		t = &thread{rec: rec, ns: map[string][]driver.Row{}, writes: map[writeKey][]store.Write{}}
		b.threads[r.Thread] = t
		b.idx.add(t)
	}
	r.Meta, r.Patch, r.Snapshot = bytes.Clone(r.Meta), bytes.Clone(r.Patch), bytes.Clone(r.Snapshot)
	if r.Head != nil && r.Namespace == "" {
		b.idx.setStatus(t, r.Head.Status, r.CreatedAt)
	}
	t.putWrites(r.Namespace, r.WritesAt, r.Writes)
	r.Create, r.NewThread, r.Head, r.Writes, r.WritesAt = nil, false, nil, nil, 0
	t.ns[r.Namespace] = append(rows, r)
	return nil
}

// seqIndex returns the index of row seq in rows (ascending by seq).
func seqIndex(rows []driver.Row, seq int64) (int, bool) {
	return slices.BinarySearchFunc(rows, seq, func(r driver.Row, s int64) int { return cmp.Compare(r.Seq, s) })
}

// AttachSnapshot implements driver.SnapshotAttacher.
func (b *Backend) AttachSnapshot(_ context.Context, r driver.Row, old uint32) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return false, err
	}
	rows := b.threads[r.Thread].rows(r.Namespace)
	i, ok := seqIndex(rows, r.Seq)
	if !ok || rows[i].Sum != old {
		return false, nil
	}
	at := &rows[i]
	at.HasSnapshot, at.Snapshot = true, bytes.Clone(r.Snapshot)
	at.Base, at.Since, at.BaseSize, at.Sum = r.Base, r.Since, r.BaseSize, r.Sum
	return true, nil
}

// rows returns the rows of a namespace; nil for a nil thread.
func (t *thread) rows(ns string) []driver.Row {
	if t == nil {
		return nil
	}
	return t.ns[ns]
}

// Rows implements driver.Backend.
func (b *Backend) Rows(_ context.Context, q driver.RowQuery) ([]driver.Row, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return nil, err
	}
	t, ok := b.threads[q.Thread]
	if !ok {
		return nil, nil
	}
	rows := t.ns[q.Namespace]
	lo := sort.Search(len(rows), func(i int) bool { return rows[i].Seq >= q.From })
	hi := len(rows)
	if q.To > 0 {
		hi = sort.Search(len(rows), func(i int) bool { return rows[i].Seq > q.To })
	}
	if lo >= hi {
		return nil, nil
	}
	sel := rows[lo:hi]
	n := len(sel)
	if q.Limit > 0 && q.Limit < n {
		n = q.Limit
	}
	out := make([]driver.Row, 0, n)
	for i := 0; i < n; i++ {
		j := i
		if q.Desc {
			j = len(sel) - 1 - i
		}
		r := sel[j]
		// A row is where it is found, as in a database table.
		r.Thread, r.Namespace = q.Thread, q.Namespace
		r.Meta = bytes.Clone(r.Meta)
		r.Patch = bytes.Clone(r.Patch)
		if q.Snapshots {
			r.Snapshot = bytes.Clone(r.Snapshot)
		} else {
			r.Snapshot = nil
		}
		out = append(out, r)
	}
	return out, nil
}

// Namespaces implements driver.Backend.
func (b *Backend) Namespaces(_ context.Context, id string) ([]driver.NamespaceRecord, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return nil, err
	}
	t, ok := b.threads[id]
	if !ok {
		return nil, nil
	}
	var out []driver.NamespaceRecord
	for ns, rows := range t.ns {
		if len(rows) > 0 {
			out = append(out, driver.NamespaceRecord{Name: ns, Head: rows[len(rows)-1].Seq, Count: int64(len(rows))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteRanges implements driver.Backend.
func (b *Backend) DeleteRanges(_ context.Context, id, ns string, head int64, ranges []driver.SeqRange, rebase []driver.Rebase) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return 0, err
	}
	t, ok := b.threads[id]
	if !ok || len(t.ns[ns]) == 0 || t.ns[ns][len(t.ns[ns])-1].Seq != head {
		return 0, fmt.Errorf("%w: thread %q namespace %q changed while it was pruned", store.ErrConflict, id, ns)
	}
	if err := rebaseRows(t.ns[ns], rebase); err != nil {
		return 0, err
	}
	in := func(seq int64) bool {
		return slices.ContainsFunc(ranges, func(r driver.SeqRange) bool { return r.From <= seq && seq <= r.To })
	}
	rows := t.ns[ns]
	kept := slices.DeleteFunc(slices.Clone(rows), func(r driver.Row) bool { return in(r.Seq) })
	t.ns[ns] = kept
	if ns == "" && len(kept) == 0 {
		b.idx.setStatus(t, store.ThreadIdle, 0)
	}
	for k := range t.writes {
		if k.ns == ns && in(k.seq) {
			delete(t.writes, k)
		}
	}
	return int64(len(rows) - len(kept)), nil
}

// rebaseRows rewrites the rows of a prune's rebase, all or none.
func rebaseRows(rows []driver.Row, rebase []driver.Rebase) error {
	at := make([]int, len(rebase))
	for k, rb := range rebase {
		i, ok := seqIndex(rows, rb.Row.Seq)
		if !ok || rows[i].Sum != rb.Old {
			return fmt.Errorf("%w: thread %q namespace %q checkpoint %d changed while it was pruned", store.ErrConflict, rb.Row.Thread, rb.Row.Namespace, rb.Row.Seq)
		}
		at[k] = i
	}
	for k, rb := range rebase {
		r := &rows[at[k]]
		r.Base, r.Since, r.BaseSize, r.Sum = rb.Row.Base, rb.Row.Since, rb.Row.BaseSize, rb.Row.Sum
		if rb.Row.HasSnapshot && rb.Row.Snapshot != nil {
			r.HasSnapshot, r.Snapshot = true, bytes.Clone(rb.Row.Snapshot)
		}
	}
	return nil
}

// PutWrites implements driver.Backend.
func (b *Backend) PutWrites(_ context.Context, id, ns string, seq int64, ws []store.Write) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	t, ok := b.threads[id]
	if !ok {
		return fmt.Errorf("%w: thread %q", store.ErrNotFound, id)
	}
	t.putWrites(ns, seq, ws)
	return nil
}

// putWrites stores pending writes of checkpoint seq (the caller holds
// the lock).
func (t *thread) putWrites(ns string, seq int64, ws []store.Write) {
	if len(ws) == 0 {
		return
	}
	k := writeKey{ns, seq}
	cur := t.writes[k]
	for _, w := range ws {
		w.Update = bytes.Clone(w.Update)
		i := slices.IndexFunc(cur, func(x store.Write) bool { return x.Task == w.Task })
		if i >= 0 {
			cur[i] = w
		} else {
			cur = append(cur, w)
		}
	}
	sort.Slice(cur, func(i, j int) bool { return cur[i].Task < cur[j].Task })
	t.writes[k] = cur
}

// Writes implements driver.Backend.
func (b *Backend) Writes(_ context.Context, id, ns string, seq int64) ([]store.Write, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return nil, err
	}
	t, ok := b.threads[id]
	if !ok {
		return nil, nil
	}
	out := slices.Clone(t.writes[writeKey{ns, seq}])
	for i := range out {
		out[i].Update = bytes.Clone(out[i].Update)
	}
	return out, nil
}

// Close implements driver.Backend.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.threads, b.runs, b.keys, b.leases, b.idx = nil, nil, nil, nil, threadIndex{}
	return nil
}

var _ driver.Backend = (*Backend)(nil)

// Tamper lets fn change a stored row in place. It exists so tests can check
// how the store reports damaged data; it reports whether the row exists.
func (b *Backend) Tamper(thread, ns string, seq int64, fn func(*driver.Row)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.threads[thread]
	if !ok {
		return false
	}
	for i := range t.ns[ns] {
		if t.ns[ns][i].Seq == seq {
			fn(&t.ns[ns][i])
			return true
		}
	}
	return false
}

// TamperThread lets fn change a stored thread record in place, as Tamper
// does for rows; a changed ID moves the thread. It reports whether the
// thread exists.
func (b *Backend) TamperThread(id string, fn func(*driver.ThreadRecord)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.threads[id]
	if !ok {
		return false
	}
	b.idx.remove(t)
	fn(&t.rec)
	if t.rec.ID != id {
		delete(b.threads, id)
		b.threads[t.rec.ID] = t
	}
	b.idx.add(t)
	return true
}

// MoveRow moves a stored row to another thread, namespace or seq without
// changing its fields, as an edit of its key columns in a database would.
// It exists for tests; it reports whether the row exists.
func (b *Backend) MoveRow(from, to store.Ref) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.threads[from.Thread]
	if !ok {
		return false
	}
	rows := t.ns[from.Namespace]
	i := slices.IndexFunc(rows, func(r driver.Row) bool { return r.Seq == from.Seq })
	if i < 0 {
		return false
	}
	r := rows[i]
	t.ns[from.Namespace] = slices.Delete(slices.Clone(rows), i, i+1)
	dst, ok := b.threads[to.Thread]
	if !ok {
		dst = &thread{rec: driver.ThreadRecord{ID: to.Thread}, ns: map[string][]driver.Row{}, writes: map[writeKey][]store.Write{}}
		b.threads[to.Thread] = dst
		b.idx.add(dst)
	}
	// Its checksum still names the old place.
	moved := append(slices.Clone(dst.ns[to.Namespace]), r)
	moved[len(moved)-1].Seq = to.Seq
	sort.Slice(moved, func(i, j int) bool { return moved[i].Seq < moved[j].Seq })
	dst.ns[to.Namespace] = moved
	return true
}
