package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

func runPath(thread, run string) string {
	return "/threads/" + runs.APIThreadID(thread) + "/runs/" + run
}

// runFromRequest reads a run request's body and creates the run;
// deliver: the request answers with the run's outcome (a stream or a
// wait), so a stateless run is kept until it has.
func (s *Server) runFromRequest(r *http.Request, deliver bool) (*runs.Run, error) {
	var q runs.Request
	if err := decodeBody(r, &q); err != nil {
		return nil, err
	}
	q.Deliver = deliver
	return s.svc.Create(r.Context(), r.PathValue("thread_id"), q)
}

// postRun creates a background run and answers with it.
func (s *Server) postRun(w http.ResponseWriter, r *http.Request) error {
	lr, err := s.runFromRequest(r, false)
	if err != nil {
		return err
	}
	rec := lr.Record()
	v, err := runs.RunViewOf(rec)
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
	defer lr.Deliver()
	return s.streamRun(w, r, lr, lr.Record(), 0, 1, nil, lr.Kwargs().OnDisconnect == "cancel")
}

// postRunWait creates a run and answers with its outcome when it ends;
// the headers go out at once and keep-alive bytes follow, so a client's
// connection slot is not held in silence.
func (s *Server) postRunWait(w http.ResponseWriter, r *http.Request) error {
	lr, err := s.runFromRequest(r, true)
	if err != nil {
		return err
	}
	defer lr.Deliver()
	return s.waitRun(w, r, lr, lr.Record(), lr.Kwargs().OnDisconnect == "cancel")
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.svc.RunOf(r.Context(), r.PathValue("thread_id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	v, err := runs.RunViewOf(rec)
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
	th, err := s.svc.Thread(ctx, r.PathValue("thread_id"))
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
	recs, err := s.svc.Runs(ctx, th, r.URL.Query().Get("status"), limit, offset)
	if err != nil {
		return err
	}
	out := make([]runs.RunView, 0, len(recs))
	for _, rec := range recs {
		v, err := runs.RunViewOf(rec)
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
	rec, err := s.svc.RunOf(ctx, r.PathValue("thread_id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	if err := s.svc.DeleteRun(ctx, rec); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// cancelRun stops a run (runs.Service.Cancel): action interrupt (the
// default) keeps what it committed, rollback also returns the thread to
// where the run began and deletes the run. wait=1 answers once it has
// stopped.
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	qs := r.URL.Query()
	wait, err := queryBool(qs, "wait")
	if err != nil {
		return err
	}
	rec, err := s.svc.RunOf(ctx, r.PathValue("thread_id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	if err := s.svc.Cancel(ctx, rec, cmp.Or(qs.Get("action"), "interrupt"), wait); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) joinRun(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.svc.RunOf(r.Context(), r.PathValue("thread_id"), r.PathValue("run_id"))
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
func (s *Server) waitRun(w http.ResponseWriter, r *http.Request, lr *runs.Run, rec store.RunRecord, cancelOnDisconnect bool) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Location", runPath(rec.Thread, rec.ID))
	w.Header().Set("Trailer", "Server-Timing")
	w.WriteHeader(http.StatusOK)
	flush(w)
	ctx := r.Context()
	if lr = s.svc.Local(lr, rec.ID); lr != nil {
		tick := time.NewTicker(s.cfg.Heartbeat)
		defer tick.Stop()
	wait:
		for {
			select {
			case <-lr.Done():
				break wait
			case <-tick.C:
				_, _ = w.Write([]byte("\n"))
				flush(w)
			case <-ctx.Done():
				if cancelOnDisconnect {
					s.svc.CancelLive(context.WithoutCancel(ctx), rec.ID)
				}
				return nil
			}
		}
		writeOutcome(w, r, lr.Outcome())
		return nil
	}
	final, err := s.svc.StoredOutcome(ctx, rec)
	if err != nil {
		final = runs.ErrorOutcome(err)
	}
	writeOutcome(w, r, final)
	return nil
}

// writeOutcome writes a run's outcome, then its Server-Timing trailer.
func writeOutcome(w http.ResponseWriter, r *http.Request, o *runs.Outcome) {
	ready := time.Now()
	_ = o.Write(w)
	_, _ = w.Write([]byte("\n"))
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 3, 64) }
	w.Header().Set("Server-Timing", "run;dur="+ms(ready.Sub(arrivalOf(r.Context())))+", answer;dur="+ms(time.Since(ready)))
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
	rec, err := s.svc.RunOf(ctx, r.PathValue("thread_id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	qs := r.URL.Query()
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = qs.Get("last_event_id")
	}
	after, attempt, err := runs.ParseEventID(rec.ID, last)
	if err != nil {
		return err
	}
	var modes []string
	for _, m := range qs["stream_mode"] {
		for _, one := range strings.Split(m, ",") {
			if !runs.IsMode(one) {
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
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request, lr *runs.Run, rec store.RunRecord, after int64, attempt int, modes []string, cancelOnDisconnect bool) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("Location", runPath(rec.Thread, rec.ID)+"/stream")
	h.Set("Content-Location", runPath(rec.Thread, rec.ID))
	w.WriteHeader(http.StatusOK)
	flush(w)
	ctx := r.Context()
	src := s.svc.Events(lr, rec, after, attempt)
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
	for {
		evs, done, wake, err := src(ctx)
		if err == nil {
			err = s.writeEvents(ctx, w, rec, evs, modes)
		}
		if err != nil {
			writeStreamError(w, rec.ID, err)
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
			if cancelOnDisconnect {
				s.svc.CancelLive(context.WithoutCancel(ctx), rec.ID)
			}
			return nil
		}
	}
}

// writeEvents writes events of the stream's modes, building those that
// refer to a checkpoint.
func (s *Server) writeEvents(ctx context.Context, w http.ResponseWriter, rec store.RunRecord, evs []*runs.Event, modes []string) error {
	for _, ev := range evs {
		if m := runs.ModeOf(ev.Event); m != "" && len(modes) > 0 && !slices.Contains(modes, m) {
			continue
		}
		data, err := s.svc.EventData(ctx, rec.Thread, ev)
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

// writeSSE writes one event with its data.
func writeSSE(w http.ResponseWriter, run string, ev *runs.Event, data json.RawMessage) {
	if bytes.IndexByte(data, '\n') >= 0 {
		// One data line per event: JSON's newlines are only whitespace.
		var c bytes.Buffer
		if json.Compact(&c, data) == nil {
			data = c.Bytes()
		}
	}
	fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", runs.EventID(run, ev.Seq, ev.Attempt), ev.Event, data)
}

// writeStreamError ends a stream with an error event: reading the run's
// events failed.
func writeStreamError(w http.ResponseWriter, run string, err error) {
	data, _ := json.Marshal(map[string]string{"error": "StreamError", "message": err.Error()}) // strings always marshal
	writeSSE(w, run, &runs.Event{Event: "error"}, data)
}
