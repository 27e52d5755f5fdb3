package inmem

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// The thread index in memory: the threads of each tenant, the threads of
// each metadata entry (which give the counters of entries), and the
// counters of threads per tenant and status. A listing reads the smallest
// of the sets its filters name (the ids, a metadata entry's threads, the
// tenant's threads), checks the other filters on each and sorts what
// matches: it costs the size of that set, which suits the stores this
// backend is for (tests, a process's own runs); the SQL backends read
// their indexes in order instead (docs/server.md, "Listing threads").

type metaKey struct{ tenant, key, value string }

type totalKey struct {
	tenant string
	status store.ThreadStatus
}

// threadIndex is the index of a backend, guarded by its lock.
type threadIndex struct {
	tenants map[string]map[string]*thread
	meta    map[metaKey]map[string]*thread
	totals  map[totalKey]int64
}

func newThreadIndex() threadIndex {
	return threadIndex{tenants: map[string]map[string]*thread{}, meta: map[metaKey]map[string]*thread{}, totals: map[totalKey]int64{}}
}

// add indexes a thread with its record's tenant, metadata and status.
func (x *threadIndex) add(t *thread) {
	if t.rec.Status == 0 {
		t.rec.Status = store.ThreadIdle
	}
	t.entries, _ = driver.IndexEntries(t.rec.Metadata) // stored metadata is valid JSON
	set := x.tenants[t.rec.Tenant]
	if set == nil {
		set = map[string]*thread{}
		x.tenants[t.rec.Tenant] = set
	}
	set[t.rec.ID] = t
	for _, e := range t.entries {
		k := metaKey{t.rec.Tenant, e.Key, e.Value}
		if x.meta[k] == nil {
			x.meta[k] = map[string]*thread{}
		}
		x.meta[k][t.rec.ID] = t
	}
	x.totals[totalKey{t.rec.Tenant, t.rec.Status}]++
}

// remove takes a thread out of the index (as add indexed it).
func (x *threadIndex) remove(t *thread) {
	delete(x.tenants[t.rec.Tenant], t.rec.ID)
	if len(x.tenants[t.rec.Tenant]) == 0 {
		delete(x.tenants, t.rec.Tenant)
	}
	for _, e := range t.entries {
		k := metaKey{t.rec.Tenant, e.Key, e.Value}
		delete(x.meta[k], t.rec.ID)
		if len(x.meta[k]) == 0 {
			delete(x.meta, k)
		}
	}
	k := totalKey{t.rec.Tenant, t.rec.Status}
	if x.totals[k]--; x.totals[k] <= 0 {
		delete(x.totals, k)
	}
}

// setStatus moves a thread to status st, set at at.
func (x *threadIndex) setStatus(t *thread, st store.ThreadStatus, at int64) {
	k := totalKey{t.rec.Tenant, t.rec.Status}
	if x.totals[k]--; x.totals[k] <= 0 {
		delete(x.totals, k)
	}
	t.rec.Status, t.statusAt = st, at
	if st == store.ThreadIdle {
		t.statusAt = 0
	}
	x.totals[totalKey{t.rec.Tenant, st}]++
}

func (t *thread) has(e driver.MetaEntry) bool {
	_, ok := slices.BinarySearchFunc(t.entries, e, func(a, b driver.MetaEntry) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
	return ok
}

// headAt is the time of a thread's root head, or its creation time.
func (t *thread) headAt() int64 {
	if rows := t.ns[""]; len(rows) > 0 {
		return rows[len(rows)-1].CreatedAt
	}
	return t.rec.CreatedAt
}

// matches checks every filter of q on a thread.
func matches(q *driver.ListQuery, t *thread, ids, exclude map[string]bool) bool {
	switch {
	case !q.AllTenants && t.rec.Tenant != q.Tenant,
		q.Status != nil && !slices.Contains(q.Status, t.rec.Status),
		q.Sort == store.SortStatusAt && t.statusAt == 0,
		ids != nil && !ids[t.rec.ID],
		exclude[t.rec.ID]:
		return false
	}
	for _, f := range q.Meta {
		if f.Not {
			if !absentOrNull(t.rec.Metadata, f.Key) {
				return false
			}
		} else if !t.has(driver.MetaEntry{Key: f.Key, Value: f.Value}) {
			return false
		}
	}
	return true
}

// absentOrNull reports whether stored metadata has no top-level member
// key, or has it null.
func absentOrNull(md []byte, key string) bool {
	var m map[string]json.RawMessage
	if len(md) == 0 || json.Unmarshal(md, &m) != nil {
		return true
	}
	v, ok := m[key]
	return !ok || string(v) == "null"
}

func idSet(ids []string) map[string]bool {
	if ids == nil {
		return nil
	}
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// selected returns the threads q selects, in no order: it reads the
// smallest set its filters name.
func (b *Backend) selected(q *driver.ListQuery) []*thread {
	ids, exclude := idSet(q.IDs), idSet(q.Exclude)
	var from map[string]*thread
	if q.AllTenants {
		from = b.threads
	} else {
		from = b.idx.tenants[q.Tenant]
	}
	for _, f := range q.Meta {
		if set := b.idx.meta[metaKey{q.Tenant, f.Key, f.Value}]; !f.Not && !q.AllTenants && len(set) < len(from) {
			from = set
		}
	}
	var out []*thread
	if ids != nil && len(ids) < len(from) {
		for id := range ids {
			if t, ok := b.threads[id]; ok && matches(q, t, ids, exclude) {
				out = append(out, t)
			}
		}
		return out
	}
	for _, t := range from {
		if matches(q, t, ids, exclude) {
			out = append(out, t)
		}
	}
	return out
}

// sortKey is what a listing orders threads by (then by id).
func sortKey(q *driver.ListQuery, t *thread) int64 {
	switch q.Sort {
	case store.SortUpdated:
		return t.headAt()
	case store.SortStatus:
		return int64(t.rec.Status)
	case store.SortStatusAt:
		return t.statusAt
	case store.SortID:
		return 0
	}
	return t.rec.CreatedAt
}

// ListThreads implements driver.ThreadIndex.
func (b *Backend) ListThreads(_ context.Context, q driver.ListQuery) ([]driver.ThreadRecord, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return nil, err
	}
	ts := b.selected(&q)
	slices.SortFunc(ts, func(x, y *thread) int {
		c := cmp.Compare(sortKey(&q, x), sortKey(&q, y))
		if c == 0 {
			c = strings.Compare(x.rec.ID, y.rec.ID)
		}
		if q.Desc {
			return -c
		}
		return c
	})
	ts = ts[min(q.Offset, len(ts)):]
	if q.Limit > 0 {
		ts = ts[:min(q.Limit, len(ts))]
	}
	out := make([]driver.ThreadRecord, len(ts))
	for i, t := range ts {
		out[i] = b.record(t)
	}
	return out, nil
}

// CountThreads implements driver.ThreadIndex.
func (b *Backend) CountThreads(_ context.Context, q driver.ListQuery) (int64, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return 0, err
	}
	return int64(len(b.selected(&q))), nil
}

// IndexCounts implements driver.ThreadIndex.
func (b *Backend) IndexCounts(_ context.Context, tenant string, all bool, meta []driver.MetaFilter) (driver.IndexCounts, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return driver.IndexCounts{}, err
	}
	c := driver.IndexCounts{Status: map[store.ThreadStatus]int64{}}
	for k, n := range b.idx.totals {
		if all || k.tenant == tenant {
			c.Status[k.status] += n
		}
	}
	if all {
		return c, nil
	}
	c.Meta = make([]int64, len(meta))
	for i, f := range meta {
		c.Meta[i] = int64(len(b.idx.meta[metaKey{tenant, f.Key, f.Value}]))
	}
	return c, nil
}

// UnclassifiedThreads implements driver.ThreadIndex: a memory store never
// has a thread of unknown status.
func (b *Backend) UnclassifiedThreads(context.Context, string, int) ([]string, error) {
	return nil, nil
}

// SetThreadStatus implements driver.ThreadIndex.
func (b *Backend) SetThreadStatus(_ context.Context, id string, st store.ThreadStatus, at int64) error {
	if !st.Valid() {
		return fmt.Errorf("%w: thread status %d", store.ErrInvalidArgument, st)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	if t, ok := b.threads[id]; ok && t.rec.Status == store.ThreadStatusUnknown {
		b.idx.setStatus(t, st, at)
	}
	return nil
}
