package server

import (
	"cmp"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

// apiQueue is what GET /queue answers: the runs waiting and running, by
// assistant, and, with a queue, the workers holding threads and (for a
// server without tenants) River's jobs by queue and state.
type apiQueue struct {
	Queued     bool                      `json:"queued"`
	Pending    int                       `json:"pending"`
	Running    int                       `json:"running"`
	Assistants []apiQueueAssistant       `json:"assistants"`
	Workers    []apiQueueWorker          `json:"workers,omitempty"`
	Jobs       map[string]map[string]int `json:"jobs,omitempty"`
}

type apiQueueAssistant struct {
	AssistantID string `json:"assistant_id"`
	Pending     int    `json:"pending"`
	Running     int    `json:"running"`
	// OldestPendingSeconds is how long the oldest pending run has waited.
	OldestPendingSeconds float64 `json:"oldest_pending_seconds"`
}

type apiQueueWorker struct {
	WorkerID string `json:"worker_id"`
	Threads  int    `json:"threads"`
}

// getQueue answers GET /queue (a Cairn extension): the caller's runs
// pending and running, and the queue's workers and jobs.
func (s *Server) getQueue(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	recs, err := s.runlog.Runs(ctx, store.RunQuery{Tenant: runs.TenantOf(ctx), Status: []string{runs.StatusPending, runs.StatusRunning}})
	if err != nil {
		return err
	}
	q := apiQueue{Queued: s.queue != nil, Assistants: queueByAssistant(recs, s.cfg.Now())}
	for _, a := range q.Assistants {
		q.Pending += a.Pending
		q.Running += a.Running
	}
	if s.queue != nil {
		st, err := s.queue.QueueStats(ctx)
		if err != nil {
			return err
		}
		for _, id := range slices.Sorted(maps.Keys(st.Workers)) {
			q.Workers = append(q.Workers, apiQueueWorker{WorkerID: id, Threads: st.Workers[id]})
		}
		if runs.TenantOf(ctx) == "" { // other tenants' volumes are not a tenant's business
			q.Jobs = st.Jobs
		}
	}
	writeJSON(w, http.StatusOK, q)
	return nil
}

// queueByAssistant counts unfinished runs by assistant.
func queueByAssistant(recs []store.RunRecord, now time.Time) []apiQueueAssistant {
	by := map[string]*apiQueueAssistant{}
	for _, rec := range recs {
		var d struct {
			AssistantID string `json:"assistant_id"`
		}
		_ = json.Unmarshal(rec.Data, &d) // a damaged record still counts
		a := by[d.AssistantID]
		if a == nil {
			a = &apiQueueAssistant{AssistantID: d.AssistantID}
			by[d.AssistantID] = a
		}
		if rec.Status == runs.StatusRunning {
			a.Running++
			continue
		}
		a.Pending++
		a.OldestPendingSeconds = max(a.OldestPendingSeconds, now.Sub(time.Unix(0, rec.CreatedAt)).Seconds())
	}
	out := make([]apiQueueAssistant, 0, len(by))
	for _, a := range by {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b apiQueueAssistant) int { return cmp.Compare(a.AssistantID, b.AssistantID) })
	return out
}

// retryRunHTTP answers POST …/runs/{run_id}/retry (a Cairn extension):
// a run that failed or was cancelled runs again from its last checkpoint.
func (s *Server) retryRunHTTP(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	rec, err := s.svc.RunOf(ctx, r.PathValue("thread_id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	if rec, err = s.svc.Retry(ctx, rec); err != nil {
		return err
	}
	if stored, err := s.runlog.Run(ctx, rec.ID); err == nil {
		rec = stored
	}
	v, err := runs.RunViewOf(rec)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
