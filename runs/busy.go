package runs

import (
	"context"
	"slices"

	"github.com/cairn-dev/cairn/store"
)

// busyIDs lists the threads this process runs or has runs waiting for.
func (m *runManager) busyIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.threads))
	for id, tr := range m.threads {
		if tr.active != nil || len(tr.waiting) > 0 {
			out = append(out, id)
		}
	}
	return out
}

// BusyThreads lists the tenant's threads that are busy (Busy): with a run
// in this process, or, with a queue, a run pending or running in the run
// log.
func (s *Service) BusyThreads(ctx context.Context) ([]string, error) {
	ids := s.runs.busyIDs()
	if s.queue != nil {
		recs, err := s.runlog.Runs(ctx, store.RunQuery{Tenant: TenantOf(ctx), Status: []string{StatusPending, StatusRunning}})
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			ids = append(ids, r.Thread)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// busy reports whether a run is on the thread or waiting for it.
func (m *runManager) busy(thread string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	tr := m.threads[thread]
	return tr != nil && (tr.active != nil || len(tr.waiting) > 0)
}

// queuedBusy reports whether a thread has a pending or running run in the
// store.
func (s *Service) queuedBusy(ctx context.Context, thread string) (bool, error) {
	recs, err := s.runlog.Runs(ctx, store.RunQuery{Thread: thread, Status: []string{StatusPending, StatusRunning}, Limit: 1})
	return len(recs) > 0, err
}

// Busy reports whether a thread has a run in progress or waiting: in this
// process, or, with a queue, in the store.
func (s *Service) Busy(ctx context.Context, thread string) bool {
	if s.runs.busy(thread) {
		return true
	}
	if s.queue == nil {
		return false
	}
	b, err := s.queuedBusy(ctx, thread)
	return err == nil && b
}
