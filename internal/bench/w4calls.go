package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// w4Run is W4's second half in progress: the calls against the bench's
// server.
type w4Run struct {
	cfg W4Config
	url string
	res *W4Result
	// newest are the creation times of the 10 newest threads, newest
	// first, and newest1000 that of the 1000th newest (Unix µs).
	newest     []int64
	newest1000 int64
	srv        *child
	api        *apiClient
	timed      int // the server's timed requests so far
}

// w4Thread is a thread as the API lists it.
type w4Thread struct {
	ThreadID  string         `json:"thread_id"`
	CreatedAt string         `json:"created_at"`
	Status    string         `json:"status"`
	Metadata  map[string]any `json:"metadata"`
	Values    struct {
		Messages []apiMessage `json:"messages"`
	} `json:"values"`
}

// serve starts the server on W4's store, checks a sample of threads,
// makes the calls and stops the server.
func (w *w4Run) serve(ctx context.Context) (err error) {
	srv, err := startServer(ctx, w.cfg.Program, w.url, w.cfg.CPUProfile, "")
	if err != nil {
		return err
	}
	w.srv = srv
	defer func() {
		if w.srv != nil {
			_ = w.srv.stop()
		}
	}()
	w.api = newAPIClient(srv.url)
	defer w.api.close()
	if err := w.sample(ctx); err != nil {
		return err
	}
	st, err := w.srv.serverStats(ctx, w.api.hc)
	if err != nil {
		return err
	}
	w.timed = len(st.Requests)
	var failed []error
	for _, c := range w.calls() {
		call, err := w.time(ctx, c)
		var he *HTTPError
		if errors.As(err, &he) && he.Status >= 500 {
			// The server failed the call (a 504 past its request
			// timeout): recorded, and the other calls still made.
			call.Error = err.Error()
			failed = append(failed, fmt.Errorf("%w: w4 %s: %w", ErrCallFailed, c.name, err))
		} else if err != nil {
			return fmt.Errorf("w4 %s: %w", c.name, err)
		}
		w.res.Calls = append(w.res.Calls, call)
	}
	if len(failed) > 0 {
		defer func() { err = errors.Join(append(failed, err)...) }()
	}
	if st, err = w.srv.serverStats(ctx, w.api.hc); err != nil {
		return err
	}
	w.res.ServerPeakRSSBytes = st.PeakRSSBytes
	err = w.srv.stop()
	w.srv = nil
	return err
}

// sample checks about 20 threads, some paused, through GET
// /threads/{id}: their metadata, status and head state.
func (w *w4Run) sample(ctx context.Context) error {
	t := w.cfg.Threads
	ids := []int{0, t - 1, min(99, t-1)}
	for k := 1; k < 18; k++ {
		ids = append(ids, k*t/18)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for _, i := range ids {
		var th w4Thread
		if err := w.api.call(ctx, http.MethodGet, "/threads/"+w4ThreadID(i), nil, &th); err != nil {
			return err
		}
		want, msgs := "idle", 2
		if w4Paused(i) {
			want, msgs = "interrupted", 1
		}
		if th.Metadata["user"] != w4User(i) || th.Status != want || len(th.Values.Messages) != msgs {
			return fmt.Errorf("%w: thread %d: user %v, status %q, %d messages; want %s, %s, %d", ErrCheck, i, th.Metadata["user"], th.Status, len(th.Values.Messages), w4User(i), want, msgs)
		}
	}
	w.res.Sampled = len(ids)
	return nil
}

// w4Spec is one call of W4: how to make it once (timed), which returns how
// to check what it answered (not timed) and the items it holds.
type w4Spec struct {
	name, request, via string
	do                 func(ctx context.Context) (func() (int, error), error)
}

// checked makes a call whose answer needs no check beyond its own.
func checked(call func(context.Context) (int, error)) func(context.Context) (func() (int, error), error) {
	return func(ctx context.Context) (func() (int, error), error) {
		n, err := call(ctx)
		return func() (int, error) { return n, nil }, err
	}
}

func (w *w4Run) calls() []w4Spec {
	threads := func(body string, check func([]w4Thread) error) func(context.Context) (func() (int, error), error) {
		return func(ctx context.Context) (func() (int, error), error) {
			var out []w4Thread
			err := w.api.call(ctx, http.MethodPost, "/threads/search", json.RawMessage(body), &out)
			return func() (int, error) { return len(out), check(out) }, err
		}
	}
	specs := []w4Spec{
		{"search user", `POST /threads/search {"metadata": {"user": "u7"}, "limit": 10}`, "http", threads(`{"metadata": {"user": "u7"}, "limit": 10}`, w.checkUser)},
		{"search newest", `POST /threads/search {"limit": 10}`, "http", threads(`{"limit": 10}`, w.checkNewest)},
		{"search offset", `POST /threads/search {"limit": 10, "offset": 1000}`, "http", threads(`{"limit": 10, "offset": 1000}`, w.checkOffset)},
		{"count", `POST /threads/count {}`, "http", checked(w.count)},
		{"interrupts", `GET /interrupts?status=pending`, "http", checked(w.interrupts)},
		{"cli threads", `cairn threads --limit 20`, "in-process", checked(w.cliInProcess)},
	}
	if w.cfg.CLIProcess {
		specs = append(specs, w4Spec{"cli threads", `cairn threads --limit 20 --json`, "process", checked(w.cliProcess)})
	}
	return specs
}

// time makes a call Repeat times and sums it up.
func (w *w4Run) time(ctx context.Context, c w4Spec) (W4Call, error) {
	out := W4Call{Name: c.name, Request: c.request, Via: c.via}
	ds := make([]time.Duration, w.cfg.Repeat)
	for k := range ds {
		t0 := time.Now()
		check, err := c.do(ctx)
		ds[k] = time.Since(t0)
		if err == nil {
			out.Items, err = check()
		}
		if err != nil {
			out.FirstMS, out.MedianMS = ms(ds[0]), ms(ds[k])
			w.skipTimed(ctx)
			return out, err
		}
	}
	out.FirstMS = ms(ds[0])
	out.MedianMS, out.P90MS = quantileUS(ds, 0.5)/1000, quantileUS(ds, 0.9)/1000
	st, err := w.srv.serverStats(ctx, w.api.hc)
	if err != nil {
		return out, err
	}
	if c.via == "http" {
		var sd []time.Duration
		for _, q := range st.Requests[w.timed:] {
			sd = append(sd, time.Duration(q.US*1000))
		}
		if len(sd) != w.cfg.Repeat {
			return out, fmt.Errorf("%w: the server timed %d requests, want %d", ErrCheck, len(sd), w.cfg.Repeat)
		}
		out.ServerMedianMS = quantileUS(sd, 0.5) / 1000
	}
	w.timed = len(st.Requests)
	return out, nil
}

// skipTimed passes over the server's timed requests so far (those of a
// failed call).
func (w *w4Run) skipTimed(ctx context.Context) {
	if st, err := w.srv.serverStats(ctx, w.api.hc); err == nil {
		w.timed = len(st.Requests)
	}
}

// checkUser: the threads of user u7, as many as there are up to 10.
func (w *w4Run) checkUser(out []w4Thread) error {
	want := 0
	for i := 7; i < w.cfg.Threads; i += 1000 {
		want++
	}
	if len(out) != min(10, want) {
		return fmt.Errorf("%w: %d threads of user u7, want %d", ErrCheck, len(out), min(10, want))
	}
	for _, th := range out {
		if th.Metadata["user"] != "u7" {
			return fmt.Errorf("%w: thread %s of user %v listed for u7", ErrCheck, th.ThreadID, th.Metadata["user"])
		}
	}
	return nil
}

// checkNewest: the 10 newest threads, newest first.
func (w *w4Run) checkNewest(out []w4Thread) error {
	if len(out) != min(10, w.cfg.Threads) {
		return fmt.Errorf("%w: %d threads, want %d", ErrCheck, len(out), min(10, w.cfg.Threads))
	}
	if err := newestFirst(out); err != nil {
		return err
	}
	tenth, err := time.Parse(time.RFC3339Nano, out[len(out)-1].CreatedAt)
	if err != nil {
		return fmt.Errorf("%w: created_at %q: %v", ErrCheck, out[len(out)-1].CreatedAt, err)
	}
	if want := w.newest[len(out)-1]; tenth.UnixMicro() < want {
		return fmt.Errorf("%w: the newest threads listed go back to %s, the %d newest to %s", ErrCheck, tenth.UTC(), len(out), time.UnixMicro(want).UTC())
	}
	return nil
}

// checkOffset: 10 threads from the 1001st newest on, newest first.
func (w *w4Run) checkOffset(out []w4Thread) error {
	if want := min(10, max(0, w.cfg.Threads-1000)); len(out) != want {
		return fmt.Errorf("%w: %d threads, want %d", ErrCheck, len(out), want)
	}
	if err := newestFirst(out); err != nil || len(out) == 0 {
		return err
	}
	first, err := time.Parse(time.RFC3339Nano, out[0].CreatedAt)
	if err != nil {
		return fmt.Errorf("%w: created_at %q: %v", ErrCheck, out[0].CreatedAt, err)
	}
	if limit := w.newest1000; first.UnixMicro() > limit {
		return fmt.Errorf("%w: the 1001st newest thread was created at %s, after the 1000th newest (%s)", ErrCheck, first.UTC(), time.UnixMicro(limit).UTC())
	}
	return nil
}

func newestFirst(out []w4Thread) error {
	for k := 1; k < len(out); k++ {
		if out[k].CreatedAt > out[k-1].CreatedAt {
			return fmt.Errorf("%w: threads not newest first: %s then %s", ErrCheck, out[k-1].CreatedAt, out[k].CreatedAt)
		}
	}
	return nil
}

// count: POST /threads/count answers T.
func (w *w4Run) count(ctx context.Context) (int, error) {
	var n int
	if err := w.api.call(ctx, http.MethodPost, "/threads/count", json.RawMessage(`{}`), &n); err != nil {
		return 0, err
	}
	if n != w.cfg.Threads {
		return n, fmt.Errorf("%w: count %d, want %d", ErrCheck, n, w.cfg.Threads)
	}
	return n, nil
}

// interrupts: the first page (50) of pending interrupts, each of a paused
// thread.
func (w *w4Run) interrupts(ctx context.Context) (int, error) {
	var out []struct {
		ThreadID string `json:"thread_id"`
		Status   string `json:"status"`
	}
	if err := w.api.call(ctx, http.MethodGet, "/interrupts?status=pending", nil, &out); err != nil {
		return 0, err
	}
	if len(out) != min(50, w.res.Paused) {
		return len(out), fmt.Errorf("%w: %d pending interrupts, want %d", ErrCheck, len(out), min(50, w.res.Paused))
	}
	for _, p := range out {
		var i int
		if _, err := fmt.Sscanf(strings.TrimPrefix(p.ThreadID, "00000000-0000-4000-8000-"), "%d", &i); err != nil || w4ThreadID(i) != p.ThreadID || !w4Paused(i) || p.Status != "pending" {
			return len(out), fmt.Errorf("%w: pending interrupt of thread %s (%s), which is not paused", ErrCheck, p.ThreadID, p.Status)
		}
	}
	return len(out), nil
}

// cliInProcess is what `cairn threads --limit 20` does before printing:
// open the store read-only, list 20 threads, close it.
func (w *w4Run) cliInProcess(ctx context.Context) (int, error) {
	s, err := store.Open(ctx, w.url, store.OpenOptions{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	n := 0
	for _, err := range s.Threads(ctx, store.ThreadFilter{Limit: 20}) {
		if err != nil {
			return n, err
		}
		n++
	}
	if n != min(20, w.cfg.Threads) {
		return n, fmt.Errorf("%w: %d threads listed, want %d", ErrCheck, n, min(20, w.cfg.Threads))
	}
	return n, nil
}

// cliProcess runs `cairn threads --limit 20 --json` on the store.
func (w *w4Run) cliProcess(ctx context.Context) (int, error) {
	cmd := w.cfg.Program("--store", w.url, "threads", "--limit", "20", "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("cairn threads: %w: %s", err, stderr.String())
	}
	var list []json.RawMessage
	if err := json.Unmarshal(out, &list); err != nil || len(list) != min(20, w.cfg.Threads) {
		return len(list), fmt.Errorf("%w: cairn threads --json printed %d threads (%v), want %d", ErrCheck, len(list), err, min(20, w.cfg.Threads))
	}
	return len(list), nil
}
