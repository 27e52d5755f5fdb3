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

func runPath(thread, run string) string {
	return "/threads/" + apiThreadID(thread) + "/runs/" + run
}

// runFromRequest reads a run request's body and creates the run;
// deliver: the request answers with the run's outcome (a stream or a
// wait), so a stateless run is kept until it has.
func (s *Server) runFromRequest(r *http.Request, deliver bool) (*liveRun, error) {
	var q runRequest
	if err := decodeBody(r, &q); err != nil {
		return nil, err
	}
	q.deliver = deliver
	return s.createRun(r.Context(), r.PathValue("thread_id"), q)
}

// postRun creates a background run and answers with it.
func (s *Server) postRun(w http.ResponseWriter, r *http.Request) error {
	lr, err := s.runFromRequest(r, false)
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
	lr, err := s.runFromRequest(r, true)
	if err != nil {
		return err
	}
	defer lr.deliver()
	return s.streamRun(w, r, lr, lr.record(), 0, 1, nil, lr.data.Kwargs.OnDisconnect == "cancel")
}

// postRunWait creates a run and answers with its outcome when it ends;
// the headers go out at once and keep-alive bytes follow, so a client's
// connection slot is not held in silence.
func (s *Server) postRunWait(w http.ResponseWriter, r *http.Request) error {
	lr, err := s.runFromRequest(r, true)
	if err != nil {
		return err
	}
	defer lr.deliver()
	return s.waitRun(w, r, lr, lr.record(), lr.data.Kwargs.OnDisconnect == "cancel")
}

// runOf returns a run of the tenant on the thread; another tenant's, or
// another thread's, is not found.
func (s *Server) runOf(ctx context.Context, thread, id string) (store.RunRecord, error) {
	th, err := s.thread(ctx, thread)
	if err != nil {
		return store.RunRecord{}, err
	}
	if err := store.ValidateID(id); err != nil {
		return store.RunRecord{}, notFound("run %q not found", id)
	}
	if lr := s.runs.get(id); lr != nil {
		if rec := lr.record(); rec.Thread == th.ID && rec.Tenant == tenantOf(ctx) {
			return rec, nil
		}
	}
	rec, err := s.runlog.Run(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (rec.Thread != th.ID || rec.Tenant != tenantOf(ctx))) {
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
	wait, err := queryBool(qs, "wait")
	if err != nil {
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
		if wait {
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
	if wait {
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
	cancelOnDisconnect, err := queryBool(r.URL.Query(), "cancel_on_disconnect")
	if err != nil {
		return err
	}
	return s.waitRun(w, r, nil, rec, cancelOnDisconnect)
}

// waitRun answers with a run's outcome once it ends: lr's, when the
// caller has the run in hand, else that of the run this server runs or
// the store records.
//
// The answer ends with a Server-Timing trailer: "run" is the time from the
// request's arrival to the outcome, "answer" the time writing it took (a
// long thread's state is a large answer).
func (s *Server) waitRun(w http.ResponseWriter, r *http.Request, lr *liveRun, rec store.RunRecord, cancelOnDisconnect bool) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Location", runPath(rec.Thread, rec.ID))
	w.Header().Set("Trailer", "Server-Timing")
	w.WriteHeader(http.StatusOK)
	flush(w)
	ctx := r.Context()
	if lr == nil || lr.log == nil {
		lr = s.runs.get(rec.ID)
	}
	if lr != nil {
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
		writeOutcome(w, r, lr.final)
		return nil
	}
	final, err := s.storedOutcome(ctx, rec)
	if err != nil {
		final = &outcome{fixed: raw(map[string]any{"__error__": map[string]string{"error": "RunError", "message": err.Error()}})}
	}
	writeOutcome(w, r, final)
	return nil
}

// writeOutcome writes a run's outcome, then its Server-Timing trailer.
func writeOutcome(w http.ResponseWriter, r *http.Request, o *outcome) {
	ready := time.Now()
	_ = o.write(w)
	_, _ = w.Write([]byte("\n"))
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 3, 64) }
	w.Header().Set("Server-Timing", "run;dur="+ms(ready.Sub(arrivalOf(r.Context())))+", answer;dur="+ms(time.Since(ready)))
}

// storedOutcome is the outcome of a run this server does not have in
// hand: ended (its thread's state, or its error) or run elsewhere (waited
// for by polling its record).
func (s *Server) storedOutcome(ctx context.Context, rec store.RunRecord) (*outcome, error) {
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
	return s.runs.finalValues(ctx, &liveRun{rec: rec, data: d}), nil
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
	after, attempt, err := parseEventID(rec.ID, last)
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
	cancelOnDisconnect, err := queryBool(qs, "cancel_on_disconnect")
	if err != nil {
		return err
	}
	return s.streamRun(w, r, nil, rec, after, attempt, modes, cancelOnDisconnect)
}

// streamRun writes a run's events after event (after, attempt) as SSE,
// live until the run ends; modes (if any) keep only those modes' events.
// lr is the run when the caller has it in hand.
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request, lr *liveRun, rec store.RunRecord, after int64, attempt int, modes []string, cancelOnDisconnect bool) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("Location", runPath(rec.Thread, rec.ID)+"/stream")
	h.Set("Content-Location", runPath(rec.Thread, rec.ID))
	w.WriteHeader(http.StatusOK)
	flush(w)
	ctx := r.Context()
	src := s.eventSource(lr, rec, after, attempt)
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
	for {
		evs, done, wake, err := src(ctx)
		if err == nil {
			err = s.writeEvents(ctx, w, rec, evs, modes)
		}
		if err != nil {
			writeSSE(w, rec.ID, inline("error", raw(map[string]string{"error": "StreamError", "message": err.Error()})), nil)
			return nil
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

// writeEvents writes events of the stream's modes, building those that
// refer to a checkpoint.
func (s *Server) writeEvents(ctx context.Context, w http.ResponseWriter, rec store.RunRecord, evs []*sseEvent, modes []string) error {
	for _, ev := range evs {
		if m := modeOf(ev.Event); m != "" && len(modes) > 0 && !slices.Contains(modes, m) {
			continue
		}
		data, err := s.eventData(ctx, rec.Thread, ev)
		if err != nil {
			return err
		}
		writeSSE(w, rec.ID, ev, data)
	}
	if len(evs) > 0 {
		flush(w)
	}
	return nil
}

// writeSSE writes one event (with data, when not nil, as its data).
func writeSSE(w http.ResponseWriter, run string, ev *sseEvent, data json.RawMessage) {
	if data == nil {
		data = ev.data
	}
	if bytes.IndexByte(data, '\n') >= 0 {
		// One data line per event: JSON's newlines are only whitespace.
		var c bytes.Buffer
		if json.Compact(&c, data) == nil {
			data = c.Bytes()
		}
	}
	fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", eventID(run, ev.Seq, ev.Attempt), ev.Event, data)
}

// source reads the events of a run's stream: each call returns the events
// not yet returned, whether the stream is complete, and a channel closed
// when more may be read.
type source func(ctx context.Context) ([]*sseEvent, bool, <-chan struct{}, error)

// eventSource reads a run's events after event (after, attempt): from its
// live log when this server runs it, else from the store, polling while
// the run goes on elsewhere.
func (s *Server) eventSource(lr *liveRun, rec store.RunRecord, after int64, attempt int) source {
	if lr == nil || lr.log == nil {
		lr = s.runs.get(rec.ID)
	}
	if lr != nil {
		after = lr.log.resume(after, attempt)
		return func(context.Context) ([]*sseEvent, bool, <-chan struct{}, error) {
			evs, done, wake := lr.log.since(after)
			if len(evs) > 0 {
				after = evs[len(evs)-1].Seq
			}
			return evs, done, wake, nil
		}
	}
	st := &storedSource{s: s, rec: rec, after: after, attempt: attempt, settled: after == 0, redact: true}
	if _, d, err := apiRunOf(rec); err == nil {
		st.redact = s.redactsFor(d.AssistantID)
	}
	return st.next
}

// storedSource reads a run's log from the store.
type storedSource struct {
	s       *Server
	rec     store.RunRecord
	after   int64
	attempt int
	// settled: after is where the reader goes on (see resumeAfter).
	settled bool
	// redact: what is built from the state is redacted (eventRef.redact).
	redact bool
}

func (st *storedSource) next(ctx context.Context) ([]*sseEvent, bool, <-chan struct{}, error) {
	if !st.settled {
		if err := st.settle(ctx); err != nil || !st.settled {
			return nil, false, after100ms(), err
		}
	}
	evs, err := storedEvents(ctx, st.s.runlog, st.rec.ID, st.rec.Thread, st.redact, st.after, 1000)
	if err != nil || len(evs) > 0 {
		if len(evs) > 0 {
			st.after = evs[len(evs)-1].Seq
		}
		return evs, false, closedChan, err
	}
	if terminal(st.rec.Status) {
		return nil, true, nil, nil
	}
	if st.rec, err = st.s.runlog.Run(ctx, st.rec.ID); err != nil {
		return nil, false, nil, err
	}
	if terminal(st.rec.Status) {
		return nil, false, closedChan, nil // read what it logged last
	}
	return nil, false, after100ms(), nil
}

// settle finds where a reader holding event (after, attempt) goes on in
// the stored log; the log may still grow with the reader's attempt while
// the run goes on at that attempt elsewhere.
func (st *storedSource) settle(ctx context.Context) error {
	rec, err := st.s.runlog.Run(ctx, st.rec.ID)
	if err != nil {
		return err
	}
	st.rec = rec
	_, d, err := apiRunOf(rec)
	if err != nil {
		return err
	}
	evs, err := storedEvents(ctx, st.s.runlog, rec.ID, rec.Thread, st.redact, 0, 0)
	if err != nil {
		return err
	}
	ended := terminal(rec.Status) || !sameAttempt(d.Attempt, st.attempt)
	st.after, st.settled = resumeAfter(evs, st.after, st.attempt, ended)
	return nil
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// after100ms is closed a moment from now: how often a run on another
// server is polled.
func after100ms() <-chan struct{} {
	c := make(chan struct{})
	time.AfterFunc(100*time.Millisecond, func() { close(c) })
	return c
}
