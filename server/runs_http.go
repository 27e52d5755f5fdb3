package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/store"
)

func runPath(thread, run string) string { return "/threads/" + thread + "/runs/" + run }

// runFromRequest reads a run request's body and creates the run.
func (s *Server) runFromRequest(r *http.Request) (*liveRun, error) {
	var q runRequest
	if err := decodeBody(r, &q); err != nil {
		return nil, err
	}
	return s.createRun(r.Context(), r.PathValue("thread_id"), q)
}

// postRun creates a background run and answers with it.
func (s *Server) postRun(w http.ResponseWriter, r *http.Request) error {
	lr, err := s.runFromRequest(r)
	if err != nil {
		return err
	}
	rec := lr.record()
	v, _, err := apiRunOf(rec)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Location", runPath(rec.Thread, rec.ID))
	writeJSON(w, http.StatusOK, v)
	return nil
}

// postRunStream creates a run and streams its events (SSE). The run goes
// on if the client leaves (unless on_disconnect is cancel); Location names
// the stream to rejoin.
func (s *Server) postRunStream(w http.ResponseWriter, r *http.Request) error {
	lr, err := s.runFromRequest(r)
	if err != nil {
		return err
	}
	return s.streamRun(w, r, lr.record(), 0, nil, lr.data.Kwargs.OnDisconnect == "cancel")
}

// postRunWait creates a run and answers with its outcome when it ends;
// the headers go out at once and keep-alive bytes follow, so a client's
// connection slot is not held in silence.
func (s *Server) postRunWait(w http.ResponseWriter, r *http.Request) error {
	lr, err := s.runFromRequest(r)
	if err != nil {
		return err
	}
	return s.waitRun(w, r, lr.record(), lr.data.Kwargs.OnDisconnect == "cancel")
}

// runOf returns a run of the tenant on the thread; another tenant's, or
// another thread's, is not found.
func (s *Server) runOf(ctx context.Context, thread, id string) (store.RunRecord, error) {
	if _, err := s.thread(ctx, thread); err != nil {
		return store.RunRecord{}, err
	}
	if err := store.ValidateThreadID(id); err != nil {
		return store.RunRecord{}, notFound("run %q not found", id)
	}
	if lr := s.runs.get(id); lr != nil {
		if rec := lr.record(); rec.Thread == thread && rec.Tenant == tenantOf(ctx) {
			return rec, nil
		}
	}
	rec, err := s.runlog.Run(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (rec.Thread != thread || rec.Tenant != tenantOf(ctx))) {
		return store.RunRecord{}, notFound("run %q not found on thread %q", id, thread)
	}
	return rec, err
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.runOf(r.Context(), r.PathValue("thread_id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	v, _, err := apiRunOf(rec)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func queryInt(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, unprocessable(name, "%q: want a number from %d to %d", v, lo, hi)
	}
	return n, nil
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	th, err := s.thread(ctx, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 10, 1, 1000)
	if err != nil {
		return err
	}
	offset, err := queryInt(r, "offset", 0, 0, 1<<30)
	if err != nil {
		return err
	}
	q := store.RunQuery{Tenant: tenantOf(ctx), Thread: th.ID, Limit: limit, Offset: offset}
	if st := r.URL.Query().Get("status"); st != "" {
		if err := oneOf("status", st, statusPending, statusRunning, statusSuccess, statusError, statusInterrupted, "timeout"); err != nil {
			return err
		}
		q.Status = []string{st}
	}
	recs, err := s.runlog.Runs(ctx, q)
	if err != nil {
		return err
	}
	out := make([]apiRun, 0, len(recs))
	for _, rec := range recs {
		if lr := s.runs.get(rec.ID); lr != nil {
			rec.Status = lr.record().Status
		}
		v, _, err := apiRunOf(rec)
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteRun(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	rec, err := s.runOf(ctx, r.PathValue("thread_id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	if s.runs.get(rec.ID) != nil {
		return conflict("run %s is %s; cancel it first", rec.ID, rec.Status)
	}
	if err := s.runlog.DeleteRun(ctx, rec.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// cancelRun stops a run: action interrupt (the default) keeps what it
// committed, rollback also returns the thread to where the run began and
// deletes the run. wait=1 answers once it has stopped.
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	qs := r.URL.Query()
	action := cmp.Or(qs.Get("action"), "interrupt")
	if err := oneOf("action", action, "interrupt", "rollback"); err != nil {
		return err
	}
	rec, err := s.runOf(ctx, r.PathValue("thread_id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	lr := s.runs.get(rec.ID)
	if lr == nil {
		if terminal(rec.Status) {
			return conflict("run %s has already ended (%s)", rec.ID, rec.Status)
		}
		if s.queue == nil {
			return conflict("run %s is %s on another server; cancel it there", rec.ID, rec.Status)
		}
		if err := s.cancelQueued(ctx, rec, action); err != nil {
			return err
		}
		if truthy(qs.Get("wait")) {
			// A rolled back run is deleted once its worker has undone it.
			if _, err := s.storedOutcome(ctx, rec); err != nil && (action != "rollback" || !errors.Is(err, store.ErrNotFound)) {
				return err
			}
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err := s.runs.cancel(ctx, lr, action); err != nil {
		return err
	}
	if truthy(qs.Get("wait")) {
		select {
		case <-lr.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) joinRun(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.runOf(r.Context(), r.PathValue("thread_id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	return s.waitRun(w, r, rec, truthy(r.URL.Query().Get("cancel_on_disconnect")))
}

// waitRun answers with a run's outcome once it ends.
func (s *Server) waitRun(w http.ResponseWriter, r *http.Request, rec store.RunRecord, cancelOnDisconnect bool) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Location", runPath(rec.Thread, rec.ID))
	w.WriteHeader(http.StatusOK)
	flush(w)
	ctx := r.Context()
	if lr := s.runs.get(rec.ID); lr != nil {
		tick := time.NewTicker(s.cfg.Heartbeat)
		defer tick.Stop()
	wait:
		for {
			select {
			case <-lr.done:
				break wait
			case <-tick.C:
				_, _ = w.Write([]byte("\n"))
				flush(w)
			case <-ctx.Done():
				if cancelOnDisconnect {
					_ = s.runs.cancel(context.WithoutCancel(ctx), lr, "interrupt")
				}
				return nil
			}
		}
		_, _ = w.Write(append(lr.final, '\n'))
		return nil
	}
	final, err := s.storedOutcome(ctx, rec)
	if err != nil {
		final = raw(map[string]any{"__error__": map[string]string{"error": "RunError", "message": err.Error()}})
	}
	_, _ = w.Write(append(final, '\n'))
	return nil
}

// storedOutcome is the outcome of a run this server does not have in
// hand: ended (its thread's state, or its error) or run elsewhere (waited
// for by polling its record).
func (s *Server) storedOutcome(ctx context.Context, rec store.RunRecord) (json.RawMessage, error) {
	for !terminal(rec.Status) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		var err error
		if rec, err = s.runlog.Run(ctx, rec.ID); err != nil {
			return nil, err
		}
	}
	_, d, err := apiRunOf(rec)
	if err != nil {
		return nil, err
	}
	lr := &liveRun{rec: rec, data: d}
	return s.runs.finalValues(ctx, lr), nil
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// joinStream rejoins a run's stream: the events after Last-Event-ID (or
// last_event_id), then live ones.
func (s *Server) joinStream(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	rec, err := s.runOf(ctx, r.PathValue("thread_id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	qs := r.URL.Query()
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = qs.Get("last_event_id")
	}
	after, err := parseEventID(rec.ID, last)
	if err != nil {
		return err
	}
	var modes []string
	for _, m := range qs["stream_mode"] {
		for _, one := range strings.Split(m, ",") {
			if _, ok := apiModes[one]; !ok {
				return unprocessable("stream_mode", "%q: want values, updates, messages, messages-tuple, custom, checkpoints, tasks or debug", one)
			}
			modes = append(modes, one)
		}
	}
	return s.streamRun(w, r, rec, after, modes, truthy(qs.Get("cancel_on_disconnect")))
}

// streamRun writes a run's events after seq after as SSE, live until the
// run ends; modes (if any) keep only those modes' events.
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request, rec store.RunRecord, after int64, modes []string, cancelOnDisconnect bool) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("Location", runPath(rec.Thread, rec.ID)+"/stream")
	h.Set("Content-Location", runPath(rec.Thread, rec.ID))
	w.WriteHeader(http.StatusOK)
	flush(w)
	ctx := r.Context()
	src := s.eventSource(rec)
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
	for {
		evs, done, wake, err := src(ctx, after)
		if err != nil {
			writeSSE(w, rec.ID, sseEvent{Event: "error", Data: raw(map[string]string{"error": "StreamError", "message": err.Error()})})
			return nil
		}
		for _, ev := range evs {
			after = ev.Seq
			if m := modeOf(ev.Event); m != "" && len(modes) > 0 && !slices.Contains(modes, m) {
				continue
			}
			writeSSE(w, rec.ID, ev)
		}
		if len(evs) > 0 {
			flush(w)
		}
		if done {
			return nil
		}
		select {
		case <-wake:
		case <-tick.C:
			_, _ = w.Write([]byte(": heartbeat\n\n"))
			flush(w)
		case <-ctx.Done():
			if lr := s.runs.get(rec.ID); lr != nil && cancelOnDisconnect {
				_ = s.runs.cancel(context.WithoutCancel(ctx), lr, "interrupt")
			}
			return nil
		}
	}
}

func writeSSE(w http.ResponseWriter, run string, ev sseEvent) {
	data := ev.Data
	if bytes.IndexByte(data, '\n') >= 0 {
		// One data line per event: JSON's newlines are only whitespace.
		var c bytes.Buffer
		if json.Compact(&c, data) == nil {
			data = c.Bytes()
		}
	}
	fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", eventID(run, ev.Seq), ev.Event, data)
}

// eventSource reads a run's events: from its live log when this server
// runs it, else from the store, polling while the run goes on elsewhere.
func (s *Server) eventSource(rec store.RunRecord) func(context.Context, int64) ([]sseEvent, bool, <-chan struct{}, error) {
	if lr := s.runs.get(rec.ID); lr != nil {
		return func(_ context.Context, after int64) ([]sseEvent, bool, <-chan struct{}, error) {
			evs, done, wake := lr.log.since(after)
			return evs, done, wake, nil
		}
	}
	status := rec.Status
	return func(ctx context.Context, after int64) ([]sseEvent, bool, <-chan struct{}, error) {
		evs, err := storedEvents(ctx, s.runlog, rec.ID, after, 1000)
		if err != nil || len(evs) > 0 {
			return evs, false, closedChan, err
		}
		if terminal(status) {
			return nil, true, nil, nil
		}
		cur, err := s.runlog.Run(ctx, rec.ID)
		if err != nil {
			return nil, false, nil, err
		}
		status = cur.Status
		if terminal(status) {
			return nil, false, closedChan, nil // read what it logged last
		}
		return nil, false, after100ms(), nil
	}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// after100ms is closed a moment from now: how often a run on another
// server is polled.
func after100ms() <-chan struct{} {
	c := make(chan struct{})
	time.AfterFunc(100*time.Millisecond, func() { close(c) })
	return c
}
