package store

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/cairn-dev/cairn/store/driver"
)

// ThreadSort orders a thread listing. Ties are broken by thread id, in the
// same direction.
type ThreadSort = driver.ThreadSort

// Orders of a thread listing.
const (
	// SortCreated: by creation time.
	SortCreated = driver.SortCreated
	// SortUpdated: by the time of the root head (Thread.UpdatedAt).
	SortUpdated = driver.SortUpdated
	// SortID: by thread id.
	SortID = driver.SortID
	// SortStatus: by status (error, idle, interrupted).
	SortStatus = driver.SortStatus
	// SortStatusAt: by the time the thread's status was set, which for an
	// interrupted or failed thread is the time of its head; only with a
	// Status filter of one status other than idle (the approvals inbox:
	// interrupted, oldest first).
	SortStatusAt = driver.SortStatusAt
)

// ThreadSearch selects, orders and pages threads through the store's
// indexes (Store.ListThreads, Store.CountThreads): no listing reads
// every thread, and none reads a head's state.
type ThreadSearch struct {
	// Tenant keeps the threads of this tenant ("" is the tenant of threads
	// created without one).
	Tenant string
	// AllTenants ignores Tenant and keeps every tenant's threads (an
	// operator's listing). Across tenants only SortID, and a Status filter
	// with SortStatusAt, read an index in order; other orders sort what
	// the filters select.
	AllTenants bool
	// Metadata keeps threads whose top-level metadata members equal these
	// JSON scalars (string, number, boolean); a nil value matches a key
	// that is absent or null.
	Metadata map[string]any
	// IDs keeps only these threads (nil: any; empty: none).
	IDs []string
	// Exclude drops these threads.
	Exclude []string
	// Status keeps threads with one of these statuses (empty: any).
	Status []ThreadStatus
	// Sort and Desc order the listing (SortCreated ascending by default).
	Sort ThreadSort
	Desc bool
	// Offset skips threads; Limit caps the listing (0: no cap, for
	// listings the filters bound).
	Offset, Limit int
}

// ListThreads implements Store.
func (e *Engine) ListThreads(ctx context.Context, s ThreadSearch) ([]Thread, error) {
	if s.Sort == SortStatus {
		return e.listByStatus(ctx, s)
	}
	q, _, err := e.prepareSearch(ctx, s, false)
	if err != nil || q == nil {
		return nil, err
	}
	recs, err := e.b.ListThreads(ctx, *q)
	if err != nil {
		return nil, err
	}
	out := make([]Thread, 0, len(recs))
	for _, r := range recs {
		t, err := threadFromRecord(r)
		if err != nil {
			return nil, err
		}
		if err := e.knownStatus(ctx, &t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// listByStatus lists threads by status, then id: the threads of each
// status in turn (error, idle, interrupted; the other way round with
// Desc), each group a listing by id of that status, skipped whole when
// the page begins after it (its count).
func (e *Engine) listByStatus(ctx context.Context, s ThreadSearch) ([]Thread, error) {
	if _, err := listQuery(s); err != nil {
		return nil, err
	}
	groups := []ThreadStatus{ThreadError, ThreadIdle, ThreadInterrupted}
	if s.Desc {
		slices.Reverse(groups)
	}
	var out []Thread
	offset := s.Offset
	for _, g := range groups {
		if len(s.Status) > 0 && !slices.Contains(s.Status, g) {
			continue
		}
		gs := s
		gs.Status, gs.Sort, gs.Offset, gs.Limit = []ThreadStatus{g}, SortID, 0, 0
		n, err := e.CountThreads(ctx, gs)
		if err != nil {
			return nil, err
		}
		if int64(offset) >= n {
			offset -= int(n)
			continue
		}
		gs.Offset, gs.Limit = offset, 0
		if s.Limit > 0 {
			gs.Limit = s.Limit - len(out)
		}
		page, err := e.ListThreads(ctx, gs)
		if err != nil {
			return nil, err
		}
		out, offset = append(out, page...), 0
		if s.Limit > 0 && len(out) >= s.Limit {
			break
		}
	}
	return out, nil
}

// knownStatus gives a thread the upgrade of an encrypted store left
// unclassified the status of its head, read with the engine's keys
// (without them, it stays ThreadStatusUnknown).
func (e *Engine) knownStatus(ctx context.Context, t *Thread) error {
	if t.Status != ThreadStatusUnknown || e.crypt.ring == nil {
		return nil
	}
	t.Status = ThreadIdle
	if t.Head == 0 {
		return nil
	}
	rows, err := e.rows(ctx, driver.RowQuery{Thread: t.ID, Desc: true, Limit: 1})
	if err != nil || len(rows) == 0 {
		return err
	}
	t.Status, _ = driver.RowThreadStatus(&rows[0])
	return nil
}

// CountThreads implements Store. A count the counters give (no filter but
// status, or one metadata filter and no status) reads a few counter rows;
// any other reads the smallest filter's threads.
func (e *Engine) CountThreads(ctx context.Context, s ThreadSearch) (int64, error) {
	s.Offset, s.Limit, s.Sort, s.Desc = 0, 0, SortCreated, false
	q, c, err := e.prepareSearch(ctx, s, true)
	if err != nil || q == nil {
		return 0, err
	}
	n, ok := countFromCounters(q, c)
	if !ok {
		return e.b.CountThreads(ctx, *q)
	}
	if len(q.Exclude) > 0 {
		x := *q
		x.IDs, x.Exclude, x.Drive = intersectIDs(q.IDs, q.Exclude), nil, driver.DriveIDs
		k, err := e.b.CountThreads(ctx, x)
		if err != nil {
			return 0, err
		}
		n -= k
	}
	return n, nil
}

// countFromCounters is the count the counters give, when they give it.
func countFromCounters(q *driver.ListQuery, c driver.IndexCounts) (int64, bool) {
	if q.IDs != nil {
		return 0, false
	}
	switch {
	case len(q.Meta) == 0:
		if q.Status == nil {
			return c.Total(), true
		}
		var n int64
		for _, s := range q.Status {
			n += c.Status[s]
		}
		return n, true
	case len(q.Meta) == 1 && q.Status == nil && c.Meta != nil:
		if q.Meta[0].Not {
			return c.Total() - c.Meta[0], true
		}
		return c.Meta[0], true
	}
	return 0, false
}

// intersectIDs is b, or the ids of b that a (when not nil) holds too.
func intersectIDs(a, b []string) []string {
	if a == nil {
		return b
	}
	out := []string{}
	for _, id := range b {
		if slices.Contains(a, id) {
			out = append(out, id)
		}
	}
	return out
}

// prepareSearch checks a search and turns it into a backend query with
// its drive, and the counters it was planned from. A nil query means the
// search selects nothing.
func (e *Engine) prepareSearch(ctx context.Context, s ThreadSearch, count bool) (*driver.ListQuery, driver.IndexCounts, error) {
	if e.closed.Load() {
		return nil, driver.IndexCounts{}, ErrClosed
	}
	q, err := listQuery(s)
	if err != nil {
		return nil, driver.IndexCounts{}, err
	}
	if q.IDs != nil && len(q.IDs) == 0 {
		return nil, driver.IndexCounts{}, nil
	}
	plain := len(q.Meta) == 0 && q.IDs == nil && q.Status == nil
	if plain && !count {
		q.Drive = driver.DriveOrder
		q.Window = 2 * int64(TouchSlack)
		return q, driver.IndexCounts{}, nil
	}
	counted := countedEntries(q.Meta)
	c, err := e.b.IndexCounts(ctx, q.Tenant, q.AllTenants, counted)
	if err != nil {
		return nil, driver.IndexCounts{}, err
	}
	if c.Status[ThreadStatusUnknown] > 0 && q.Status != nil {
		if _, err := e.ClassifyThreads(ctx); err != nil {
			return nil, driver.IndexCounts{}, err
		}
		if c, err = e.b.IndexCounts(ctx, q.Tenant, q.AllTenants, counted); err != nil {
			return nil, driver.IndexCounts{}, err
		}
	}
	if plan(q, c, count) {
		return nil, c, nil // the counters say nothing matches
	}
	return q, c, nil
}

// countedEntries are the entries whose counters plan a query's metadata
// filters: a filter's own, or for a key absent or null the key's
// MetaPresent entry (the threads that have the key).
func countedEntries(meta []driver.MetaFilter) []driver.MetaFilter {
	out := make([]driver.MetaFilter, len(meta))
	for i, f := range meta {
		out[i] = driver.MetaFilter{Key: f.Key, Value: f.Value}
		if f.Not {
			out[i] = driver.MetaFilter{Key: driver.IndexForm(f.Key), Value: driver.MetaPresent}
		}
	}
	return out
}

// listQuery checks a search and builds its backend query (drive not
// chosen yet).
func listQuery(s ThreadSearch) (*driver.ListQuery, error) {
	if s.Offset < 0 || s.Limit < 0 {
		return nil, fmt.Errorf("%w: offset %d, limit %d: must not be negative", ErrInvalidArgument, s.Offset, s.Limit)
	}
	if s.Sort > SortStatusAt {
		return nil, fmt.Errorf("%w: thread sort %d", ErrInvalidArgument, s.Sort)
	}
	for _, st := range s.Status {
		if !st.Valid() {
			return nil, fmt.Errorf("%w: thread status %d", ErrInvalidArgument, st)
		}
	}
	if s.Sort == SortStatusAt && (len(s.Status) != 1 || s.Status[0] == ThreadIdle) {
		return nil, fmt.Errorf("%w: sorting by the time of the status needs a filter of one status, interrupted or error", ErrInvalidArgument)
	}
	q := &driver.ListQuery{Tenant: s.Tenant, AllTenants: s.AllTenants, IDs: s.IDs, Exclude: s.Exclude, Sort: s.Sort, Desc: s.Desc, Offset: s.Offset, Limit: s.Limit}
	if len(s.Status) > 0 {
		q.Status = slices.Compact(slices.Sorted(slices.Values(s.Status)))
	}
	if q.AllTenants {
		q.Tenant = ""
	}
	for _, k := range slices.Sorted(maps.Keys(s.Metadata)) {
		v := s.Metadata[k]
		if v == nil {
			q.Meta = append(q.Meta, driver.MetaFilter{Key: k, Not: true})
			continue
		}
		val, ok, err := driver.ScalarForm(v)
		if err != nil || !ok {
			return nil, fmt.Errorf("%w: metadata filter %q must be a JSON scalar (string, number, boolean or null)", ErrInvalidArgument, k)
		}
		q.Meta = append(q.Meta, driver.MetaFilter{Key: driver.IndexForm(k), Value: val})
	}
	return q, nil
}

// plan chooses the index a query reads first. Reading an index in the
// listing's order costs about (Offset+Limit) × its threads ÷ the threads
// that match (filters are checked on each thread read); reading a
// filter's threads and sorting them costs their number. The smaller wins,
// so no listing reads more than about √(page end × threads) threads. It
// reports true when the counters (exact) say no thread matches.
func plan(q *driver.ListQuery, c driver.IndexCounts, count bool) (none bool) {
	sz := sizes(q, c)
	if sz.est == 0 {
		return true
	}
	page := int64(q.Offset + q.Limit)
	ordered := func(size int64) int64 {
		if count || q.Limit == 0 {
			return size
		}
		return min(size, int64(float64(page)*float64(size)/sz.est)+1)
	}
	// Threads read and then sorted cost more than threads read in order
	// (and by head time, a lookup of each head).
	sorted := func(size int64) int64 {
		switch {
		case count:
			return size
		case q.Sort == SortUpdated:
			return 8 * size
		}
		return 2 * size
	}
	best, cost := driver.DriveOrder, sorted(sz.n)
	if orderIndexed(q) {
		cost = ordered(sz.n)
	}
	if statusIndexed(q) {
		c := sorted(sz.status)
		if statusOrdered(q) {
			c = ordered(sz.status)
		}
		if c < cost || q.Sort == SortStatusAt {
			best, cost = driver.DriveStatus, c
		}
	}
	for i, f := range q.Meta {
		c := sorted(sz.meta[i])
		if q.Sort == SortCreated {
			c = ordered(sz.meta[i])
		}
		if !f.Not && !q.AllTenants && c < cost {
			best, cost = driver.DriveMeta, c
			q.Meta[0], q.Meta[i] = q.Meta[i], q.Meta[0]
			sz.meta[0], sz.meta[i] = sz.meta[i], sz.meta[0]
		}
	}
	if q.IDs != nil && int64(len(q.IDs)) < cost {
		best = driver.DriveIDs
	}
	q.Drive = best
	if best == driver.DriveOrder && q.Sort == SortUpdated {
		q.Window = 2 * int64(TouchSlack)
	}
	return false
}

// querySizes are the counters' measures of a query: the tenant's threads
// (n), the threads of its statuses, of each metadata filter, and the
// threads expected to match them all (est, taking the filters as
// independent).
type querySizes struct {
	n, status int64
	meta      []int64
	est       float64
}

func sizes(q *driver.ListQuery, c driver.IndexCounts) querySizes {
	sz := querySizes{n: max(c.Total(), 1), meta: make([]int64, len(q.Meta))}
	sz.status = sz.n
	if q.Status != nil {
		sz.status = 0
		for _, s := range q.Status {
			sz.status += c.Status[s]
		}
	}
	sz.est = float64(sz.status)
	for i, f := range q.Meta {
		switch {
		case c.Meta == nil: // not counted (across tenants)
			sz.meta[i] = sz.n
		case f.Not:
			sz.meta[i] = sz.n - c.Meta[i]
		default:
			sz.meta[i] = c.Meta[i]
		}
		sz.est *= float64(sz.meta[i]) / float64(sz.n)
	}
	if q.IDs != nil {
		sz.est = min(sz.est, float64(len(q.IDs)))
	}
	return sz
}

// orderIndexed reports whether an index gives the listing's order: within
// a tenant, by creation or touch time; by id (the primary key, its other
// tenants' threads skipped); by the time of a status, for that status.
// Across tenants, only by id.
func orderIndexed(q *driver.ListQuery) bool {
	switch {
	case q.AllTenants:
		return q.Sort == SortID
	case q.Sort == SortStatusAt:
		return false // its index is the status index
	}
	return true
}

// statusIndexed reports whether the status index, which holds the threads
// that are not idle (interrupted, failed, unknown), selects the query's
// statuses: they must all be of those (across tenants, only in the order
// of the time of the status).
func statusIndexed(q *driver.ListQuery) bool {
	if q.Status == nil || slices.Contains(q.Status, ThreadIdle) {
		return false
	}
	return !q.AllTenants || q.Sort == SortStatusAt
}

// statusOrdered reports whether the status index gives the listing's
// order: by the time of the status, or for one status by creation time.
func statusOrdered(q *driver.ListQuery) bool {
	if q.AllTenants || len(q.Status) != 1 {
		return false
	}
	return q.Sort == SortStatusAt || q.Sort == SortCreated
}

// ClassifyThreads gives a status to the threads an upgrade left without
// one (ThreadStatusUnknown: an encrypted store's heads, whose stop reason
// is sealed), reading each one's head with the engine's keys. A listing
// that filters or sorts by status does it first; `cairn migrate up` does
// it at once. It returns how many threads it classified.
func (e *Engine) ClassifyThreads(ctx context.Context) (int, error) {
	if e.closed.Load() {
		return 0, ErrClosed
	}
	n, after := 0, ""
	for {
		ids, err := e.b.UnclassifiedThreads(ctx, after, 256)
		if err != nil || len(ids) == 0 {
			return n, err
		}
		for _, id := range ids {
			rows, err := e.rows(ctx, driver.RowQuery{Thread: id, Desc: true, Limit: 1})
			if err != nil {
				return n, err
			}
			st, at := ThreadIdle, int64(0)
			if len(rows) > 0 {
				st, _ = driver.RowThreadStatus(&rows[0])
				at = rows[0].CreatedAt
			}
			if err := e.b.SetThreadStatus(ctx, id, st, at); err != nil {
				return n, err
			}
			n++
		}
		after = ids[len(ids)-1]
	}
}
