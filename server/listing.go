package server

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

// Thread listings page through the store's thread index
// (store.ThreadSearch): a page of n threads reads n heads, to show their
// values and interrupts, whatever the number of threads. What the index
// does not hold the server adds: "busy" (a run on the thread, in this
// process or, with a queue, in the run log) is a set small enough to list,
// so a status filter excludes it or keeps only it, and a sort by status
// places it; values filters read each candidate's state, and so need the
// other filters to select at most maxValuesScan threads.

// maxValuesScan is how many threads a search or count with a values
// filter may read the state of.
const maxValuesScan = 10_000

// threadSort is the store's order for a search's sort_by and sort_order:
// newest first by creation unless it says otherwise; by thread id
// ascending unless sort_order says desc.
func threadSort(by, order string) (store.ThreadSort, bool) {
	desc := order == "desc" || (order == "" && by != "thread_id")
	switch by {
	case "thread_id":
		return store.SortID, desc
	case "status":
		return store.SortStatus, desc
	case "updated_at", "state_updated_at":
		return store.SortUpdated, desc
	}
	return store.SortCreated, desc
}

// threadList is a search as the store answers it, with the busy threads
// the server knows.
type threadList struct {
	s      *Server
	search store.ThreadSearch
	status string
	busy   []string
}

// newThreadList prepares a search (checked) of the request's tenant.
func (s *Server) newThreadList(ctx context.Context, q threadSearch) (*threadList, error) {
	busy, err := s.svc.BusyThreads(ctx)
	if err != nil {
		return nil, err
	}
	l := &threadList{s: s, status: q.Status, busy: busy}
	l.search = store.ThreadSearch{Tenant: runs.TenantOf(ctx), Metadata: q.Metadata}
	l.search.Sort, l.search.Desc = threadSort(q.SortBy, q.SortOrder)
	for _, id := range q.IDs {
		l.search.IDs = append(l.search.IDs, runs.ThreadKey(ctx, id))
	}
	switch q.Status {
	case "":
	case "busy":
		l.search.IDs = intersect(l.search.IDs, busy)
	default:
		st, err := store.ParseThreadStatus(q.Status)
		if err != nil {
			return nil, unprocessable("$.status", "%v", err)
		}
		l.search.Status = []store.ThreadStatus{st}
		l.search.Exclude = busy
	}
	return l, nil
}

// intersect is the ids of b that a (when not nil) holds too; never nil.
func intersect(a, b []string) []string {
	out := []string{}
	for _, id := range b {
		if a == nil || slices.Contains(a, id) {
			out = append(out, id)
		}
	}
	return out
}

// mergesBusy reports whether the listing places busy threads itself: a
// sort by status with no status filter puts them in their own group.
func (l *threadList) mergesBusy() bool {
	return l.status == "" && l.search.Sort == store.SortStatus && len(l.busy) > 0
}

// count is how many threads the search selects.
func (l *threadList) count(ctx context.Context) (int64, error) {
	if !l.mergesBusy() {
		return l.s.store.CountThreads(ctx, l.search)
	}
	rest, busy := l.split()
	n, err := l.s.store.CountThreads(ctx, rest)
	if err != nil {
		return 0, err
	}
	k, err := l.s.store.CountThreads(ctx, busy)
	return n + k, err
}

// split is a merged listing's two parts: the threads that are not busy,
// and the busy ones (by id).
func (l *threadList) split() (rest, busy store.ThreadSearch) {
	rest, busy = l.search, l.search
	rest.Exclude = l.busy
	busy.IDs, busy.Sort, busy.Offset, busy.Limit = intersect(l.search.IDs, l.busy), store.SortID, 0, 0
	return rest, busy
}

// page lists threads offset to offset+limit.
func (l *threadList) page(ctx context.Context, offset, limit int) ([]store.Thread, error) {
	if limit == 0 {
		return nil, nil
	}
	if !l.mergesBusy() {
		s := l.search
		s.Offset, s.Limit = offset, limit
		return l.s.store.ListThreads(ctx, s)
	}
	return l.mergedPage(ctx, offset, limit)
}

// mergedPage lists a page of a sort by status with busy threads: "busy"
// sorts before error, idle and interrupted, so the busy threads (by id)
// come first in ascending order and last in descending order.
func (l *threadList) mergedPage(ctx context.Context, offset, limit int) ([]store.Thread, error) {
	rest, bs := l.split()
	busy, err := l.s.store.ListThreads(ctx, bs)
	if err != nil {
		return nil, err
	}
	if l.search.Desc {
		slices.Reverse(busy)
		n, err := l.s.store.CountThreads(ctx, rest)
		if err != nil {
			return nil, err
		}
		var out []store.Thread
		if int64(offset) < n {
			rest.Offset, rest.Limit = offset, limit
			if out, err = l.s.store.ListThreads(ctx, rest); err != nil {
				return nil, err
			}
		}
		from := max(0, offset-int(n))
		return append(out, busy[min(from, len(busy)):min(from+limit-len(out), len(busy))]...), nil
	}
	out := slices.Clone(busy[min(offset, len(busy)):min(offset+limit, len(busy))])
	if len(out) < limit {
		rest.Offset, rest.Limit = max(0, offset-len(busy)), limit-len(out)
		more, err := l.s.store.ListThreads(ctx, rest)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// views builds the API views of a page of threads (each reads its head).
func (s *Server) views(ctx context.Context, ths []store.Thread) ([]apiThread, error) {
	out := make([]apiThread, 0, len(ths))
	for _, th := range ths {
		v, err := s.threadView(ctx, th)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// findThreads returns a page of the tenant's threads that match q, as
// views, and how many match in all.
func (s *Server) findThreads(ctx context.Context, q threadSearch, offset, limit int) ([]apiThread, int64, error) {
	l, err := s.newThreadList(ctx, q)
	if err != nil {
		return nil, 0, err
	}
	if len(q.Values) > 0 {
		return s.findByValues(ctx, l, q.Values, offset, limit)
	}
	total, err := l.count(ctx)
	if err != nil {
		return nil, 0, err
	}
	ths, err := l.page(ctx, offset, limit)
	if err != nil {
		return nil, 0, err
	}
	views, err := s.views(ctx, ths)
	return views, total, err
}

// findByValues answers a search with a values filter: it reads the state
// of every thread the other filters select, in order, which they must
// bound (maxValuesScan).
func (s *Server) findByValues(ctx context.Context, l *threadList, values map[string]any, offset, limit int) ([]apiThread, int64, error) {
	n, err := l.count(ctx)
	if err != nil {
		return nil, 0, err
	}
	if n > maxValuesScan {
		return nil, 0, unprocessable("$.values", "a values filter reads the state of every thread the other filters select: %d threads, more than %d; narrow the search with metadata, status or ids", n, maxValuesScan)
	}
	var out []apiThread
	var total int64
	const batch = 100
	for at := 0; int64(at) < n; at += batch {
		ths, err := l.page(ctx, at, batch)
		if err != nil {
			return nil, 0, err
		}
		views, err := s.views(ctx, ths)
		if err != nil {
			return nil, 0, err
		}
		for _, v := range views {
			if !valuesMatch(v.Values, values) {
				continue
			}
			if total >= int64(offset) && len(out) < limit {
				out = append(out, v)
			}
			total++
		}
		if len(ths) < batch {
			break
		}
	}
	return out, total, nil
}

// valuesMatch: every top-level key of the filter equals the state's.
func valuesMatch(values json.RawMessage, filter map[string]any) bool {
	if len(filter) == 0 {
		return true
	}
	var st map[string]any
	if json.Unmarshal(values, &st) != nil {
		return false
	}
	for k, v := range filter {
		if !reflect.DeepEqual(st[k], v) {
			return false
		}
	}
	return true
}

// pausedThreads lists a page of the tenant's interrupted threads, oldest
// pause first (the thread index's order by the time of the status), whose
// metadata matches md and, when assistant is set, whose assistant it is.
// Scalar and null members of md are index filters; other members and the
// assistant (thread metadata or the thread's last run, never its head)
// are checked on each interrupted thread read, in order.
func (s *Server) pausedThreads(ctx context.Context, md map[string]any, assistant string, offset, limit int) ([]store.Thread, error) {
	search := store.ThreadSearch{Tenant: runs.TenantOf(ctx), Status: []store.ThreadStatus{store.ThreadInterrupted}, Sort: store.SortStatusAt}
	rest := map[string]any{}
	for k, v := range md {
		switch v.(type) {
		case string, float64, bool, nil:
			if search.Metadata == nil {
				search.Metadata = map[string]any{}
			}
			search.Metadata[k] = v
		default:
			rest[k] = v
		}
	}
	if len(rest) == 0 && assistant == "" {
		search.Offset, search.Limit = offset, limit
		return s.store.ListThreads(ctx, search)
	}
	var out []store.Thread
	skipped := 0
	const batch = 100
	for at := 0; ; at += batch {
		search.Offset, search.Limit = at, batch
		ths, err := s.store.ListThreads(ctx, search)
		if err != nil {
			return nil, err
		}
		for _, th := range ths {
			if !metadataMatch(th.Metadata, rest) || (assistant != "" && s.assistantOf(ctx, th) != assistant) {
				continue
			}
			if skipped < offset {
				skipped++
				continue
			}
			if out = append(out, th); len(out) == limit {
				return out, nil
			}
		}
		if len(ths) < batch {
			return out, nil
		}
	}
}

// assistantOf names a thread's assistant ("" when it has none).
func (s *Server) assistantOf(ctx context.Context, th store.Thread) string {
	a, err := s.svc.ThreadAssistant(ctx, th)
	if err != nil {
		return ""
	}
	return a.Info().ID
}
