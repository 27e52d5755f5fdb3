package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// W3 thread ids: one fixed UUID per series.
const (
	W3WaitThread   = "c4a1f3e0-0000-4000-8000-000000000301"
	W3StreamThread = "c4a1f3e0-0000-4000-8000-000000000302"
)

// ErrCheck: a workload's answer was wrong; the figures are not reported.
var ErrCheck = errors.New("bench: check failed")

// W3Config configures W3: one thread, Turns turns of the chat assistant
// through the LangGraph API.
type W3Config struct {
	Turns int // N (default 1000)
	// Series are "wait" (POST /threads/{id}/runs/wait) and "stream"
	// (POST /threads/{id}/runs/stream, default stream mode), run in turn,
	// each on its own thread and server process.
	Series []string
	// Store is the store URL the bench's server serves (empty: a fresh
	// SQLite file per series, in a temporary directory).
	Store string
	// URL, when set, is an already-running server to drive instead of the
	// bench's own (no store bytes, no server times); Assistant the
	// assistant it serves W3's chat as, and PID its process (0: unknown),
	// for its memory and CPU.
	URL       string
	Assistant string
	PID       int
	// AssistantFile, when set, is a chat agent file (kind: chat, such as
	// examples/serve/chat.md) the bench's own server serves W3's turns
	// with, instead of the Go graph (ChatGraph); Assistant becomes its
	// name.
	AssistantFile string
	// Program starts the bench's own server process.
	Program Program
	// CPUProfile, when set, is where the server process writes a CPU
	// profile (with two series: CPUProfile + ".wait" and ".stream").
	CPUProfile string
	// Progress, when set, receives a line every tenth of the turns.
	Progress io.Writer
}

// W3Result holds W3's figures.
type W3Result struct {
	Workload  string `json:"workload"`
	Store     string `json:"store,omitempty"`
	URL       string `json:"url,omitempty"`
	Assistant string `json:"assistant"`
	// AssistantFile is the chat agent file served, if one was.
	AssistantFile string     `json:"assistant_file,omitempty"`
	Turns         int        `json:"turns"`
	Series        []W3Series `json:"series"`
}

// W3Series holds the figures of one series of W3.
type W3Series struct {
	Series string  `json:"series"`
	Thread string  `json:"thread_id"`
	Store  string  `json:"store,omitempty"`
	TotalS float64 `json:"total_s"`
	// Connections is the TCP connections the client opened (1: every turn
	// went over one keep-alive connection).
	Connections int64 `json:"connections"`
	// Latency is each turn's time at the client, from sending the request
	// to the end of its answer; Server the time the server's handler took
	// for it (the bench's own server only).
	Latency *Summary `json:"latency_ms"`
	Server  *Summary `json:"server_ms,omitempty"`
	// Run and Answer split a wait's time at the server, as its
	// Server-Timing trailer says (servers that send one): from the
	// request's arrival to the run's outcome, and writing the answer (the
	// whole state).
	Run    *Summary `json:"server_run_ms,omitempty"`
	Answer *Summary `json:"server_answer_ms,omitempty"`
	// Bytes is what the store holds after the series (the bench's own
	// server only), and per turn, by kind.
	Bytes                  *StoreBytes `json:"store_bytes,omitempty"`
	CheckpointBytesPerTurn float64     `json:"checkpoint_bytes_per_turn,omitempty"`
	OtherBytesPerTurn      float64     `json:"other_bytes_per_turn,omitempty"`
	// ServerPeakRSSBytes is the server process's peak resident memory
	// (VmHWM) after the last turn; ServerCPUMS the CPU time it spent on
	// the turns.
	ServerPeakRSSBytes int64   `json:"server_peak_rss_bytes,omitempty"`
	ServerCPUMS        float64 `json:"server_cpu_ms,omitempty"`
	ServerCPUPerTurnMS float64 `json:"server_cpu_ms_per_turn,omitempty"`
	// StateMessages is the messages of the thread's state at the end
	// (checked: 2 × turns); LastAnswerBytes the size of the last turn's
	// answer body.
	StateMessages   int    `json:"state_messages"`
	LastAnswerBytes int    `json:"last_answer_bytes"`
	CPUProfile      string `json:"cpu_profile,omitempty"`
}

// RunW3 runs W3's series and checks each: every turn's answer holds the
// assistant's reply, and the thread's state ends with 2 × turns messages.
func RunW3(ctx context.Context, cfg W3Config) (W3Result, error) {
	if err := cfg.check(); err != nil {
		return W3Result{}, err
	}
	res := W3Result{Workload: "w3", Store: cfg.Store, URL: cfg.URL, Assistant: cfg.Assistant, AssistantFile: cfg.AssistantFile, Turns: cfg.Turns}
	for _, series := range cfg.Series {
		s, err := runW3Series(ctx, cfg, series)
		if err != nil {
			return res, fmt.Errorf("w3 %s: %w", series, err)
		}
		res.Series = append(res.Series, s)
	}
	return res, nil
}

// check completes the configuration with its defaults and refuses what
// cannot run.
func (cfg *W3Config) check() error {
	if cfg.Turns == 0 {
		cfg.Turns = 1000
	}
	if cfg.Turns < 1 {
		return fmt.Errorf("%w: turns %d: want at least 1", store.ErrInvalidArgument, cfg.Turns)
	}
	if len(cfg.Series) == 0 {
		cfg.Series = []string{"wait", "stream"}
	}
	for _, s := range cfg.Series {
		if s != "wait" && s != "stream" {
			return fmt.Errorf("%w: series %q: want wait or stream", store.ErrInvalidArgument, s)
		}
	}
	if cfg.URL == "" {
		return cfg.checkOwn()
	}
	if cfg.Store != "" || cfg.CPUProfile != "" || cfg.AssistantFile != "" {
		return fmt.Errorf("%w: a store, a CPU profile and an assistant file are for the bench's own server, not an external one (URL)", store.ErrInvalidArgument)
	}
	if cfg.Assistant == "" {
		cfg.Assistant = ChatAssistantID
	}
	return nil
}

// w3Run is one series in progress.
type w3Run struct {
	cfg      W3Config
	series   string
	thread   string
	storeURL string
	srv      *child
	api      *apiClient
	before   map[string]int64
	cpu0     time.Duration
	res      W3Series
}

func runW3Series(ctx context.Context, cfg W3Config, series string) (W3Series, error) {
	r := &w3Run{cfg: cfg, series: series, thread: W3WaitThread}
	if series == "stream" {
		r.thread = W3StreamThread
	}
	r.res = W3Series{Series: series, Thread: r.thread}
	cleanup, err := r.start(ctx)
	defer cleanup()
	if err != nil {
		return r.res, err
	}
	defer r.api.close()
	if err := r.createThread(ctx); err != nil {
		return r.res, err
	}
	if err := r.baseline(ctx); err != nil {
		return r.res, err
	}
	times, last, err := r.turns(ctx)
	if err != nil {
		return r.res, err
	}
	r.res.Latency = summarize(times)
	if err := r.measureServer(ctx); err != nil {
		return r.res, err
	}
	if err := r.verify(ctx, last); err != nil {
		return r.res, err
	}
	return r.res, r.finish(ctx)
}

// start starts the bench's own server on a store (or points at the
// external one) and makes the client.
func (r *w3Run) start(ctx context.Context) (func(), error) {
	cleanup := func() {}
	if r.cfg.URL != "" {
		r.api = newAPIClient(r.cfg.URL)
		return cleanup, nil
	}
	r.storeURL = r.cfg.Store
	if r.storeURL == "" {
		dir, err := os.MkdirTemp("", "cairn-bench-w3-")
		if err != nil {
			return cleanup, err
		}
		cleanup = func() { os.RemoveAll(dir) }
		r.storeURL = "sqlite:" + filepath.Join(dir, "w3.db")
	}
	r.res.Store = r.storeURL
	prof := r.cfg.CPUProfile
	if prof != "" && len(r.cfg.Series) > 1 {
		prof += "." + r.series
	}
	r.res.CPUProfile = prof
	srv, err := startServer(ctx, r.cfg.Program, r.storeURL, prof, r.cfg.AssistantFile)
	if err != nil {
		return cleanup, err
	}
	r.srv = srv
	inner := cleanup
	cleanup = func() {
		if r.srv != nil {
			_ = r.srv.stop()
		}
		inner()
	}
	r.api = newAPIClient(srv.url)
	var derr error
	r.before, _, _, derr = tableSizes(ctx, r.storeURL)
	return cleanup, derr
}

// createThread creates the series' thread with its fixed id. On the
// bench's own store it must not exist yet; an external server's is
// deleted first.
func (r *w3Run) createThread(ctx context.Context) error {
	body := map[string]string{"thread_id": r.thread}
	err := r.api.call(ctx, http.MethodPost, "/threads", body, nil)
	var he *HTTPError
	if errors.As(err, &he) && he.Status == http.StatusConflict {
		if r.srv != nil {
			return fmt.Errorf("%w: thread %s already exists in %s: W3 needs a store without it (a new SQLite file or PostgreSQL schema)", store.ErrConflict, r.thread, r.storeURL)
		}
		if err := r.api.call(ctx, http.MethodDelete, "/threads/"+r.thread, nil, nil); err != nil {
			return err
		}
		err = r.api.call(ctx, http.MethodPost, "/threads", body, nil)
	}
	return err
}

// baseline reads the server's CPU time before the first turn.
func (r *w3Run) baseline(ctx context.Context) error {
	switch {
	case r.srv != nil:
		st, err := r.srv.serverStats(ctx, r.api.hc)
		if err != nil {
			return err
		}
		r.cpu0 = time.Duration(st.CPUMS * float64(time.Millisecond))
	case r.cfg.PID > 0:
		r.cpu0 = cpuOf(r.cfg.PID)
	}
	return nil
}

// turns runs the series' turns, timing each, and returns their times and
// the last turn's answer.
func (r *w3Run) turns(ctx context.Context) ([]time.Duration, []byte, error) {
	n := r.cfg.Turns
	times := make([]time.Duration, n)
	var run, answer []time.Duration
	path := "/threads/" + r.thread + "/runs/" + r.series
	start := time.Now()
	for i := 1; i <= n; i++ {
		body := turnBody(r.cfg.Assistant, i)
		t0 := time.Now()
		err := r.api.do(ctx, http.MethodPost, path, body)
		times[i-1] = time.Since(t0)
		if err != nil {
			return nil, nil, fmt.Errorf("turn %d: %w", i, err)
		}
		if ru, an, ok := serverTiming(r.api.trailer.Get("Server-Timing")); ok {
			run, answer = append(run, ru), append(answer, an)
		}
		if err := checkAnswer(r.series, r.api.buf.Bytes(), i); err != nil {
			return nil, nil, err
		}
		if r.cfg.Progress != nil && n >= 10 && i%(n/10) == 0 {
			fmt.Fprintf(r.cfg.Progress, "w3 %s: turn %d of %d, %.1f ms\n", r.series, i, n, times[i-1].Seconds()*1000)
		}
	}
	r.res.TotalS = time.Since(start).Seconds()
	if len(run) == n {
		r.res.Run, r.res.Answer = summarize(run), summarize(answer)
	}
	r.res.Connections = r.api.conns.Load()
	last := bytes.Clone(r.api.buf.Bytes())
	r.res.LastAnswerBytes = len(last)
	return times, last, nil
}

// serverTiming reads a wait's Server-Timing trailer ("run;dur=MS,
// answer;dur=MS").
func serverTiming(v string) (run, answer time.Duration, ok bool) {
	var r, a float64
	if _, err := fmt.Sscanf(v, "run;dur=%g, answer;dur=%g", &r, &a); err != nil {
		return 0, 0, false
	}
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	return ms(r), ms(a), true
}

// checkAnswer checks that turn i's answer holds the assistant's reply
// (and, streamed, no error event).
func checkAnswer(series string, body []byte, i int) error {
	if bytes.LastIndex(body, []byte(Answer(TurnText(i)))) < 0 {
		return fmt.Errorf("%w: turn %d: the answer lacks the assistant's reply %q: %s", ErrCheck, i, Answer(TurnText(i)), truncate(string(body), 500))
	}
	if series == "stream" && bytes.Contains(body, []byte("event: error")) {
		return fmt.Errorf("%w: turn %d: the stream carried an error: %s", ErrCheck, i, truncate(string(body), 500))
	}
	return nil
}

// measureServer reads what the server spent on the turns: its handler
// times, CPU and peak memory.
func (r *w3Run) measureServer(ctx context.Context) error {
	n := float64(r.cfg.Turns)
	switch {
	case r.srv != nil:
		st, err := r.srv.serverStats(ctx, r.api.hc)
		if err != nil {
			return err
		}
		var ds []time.Duration
		for _, q := range st.Requests {
			if strings.HasPrefix(q.Route, "POST ") && strings.HasSuffix(q.Route, "/runs/"+r.series) {
				ds = append(ds, time.Duration(q.US*1000))
			}
		}
		if len(ds) != r.cfg.Turns {
			return fmt.Errorf("%w: the server timed %d run requests, want %d", ErrCheck, len(ds), r.cfg.Turns)
		}
		r.res.Server = summarize(ds)
		r.res.ServerPeakRSSBytes = st.PeakRSSBytes
		r.res.ServerCPUMS = st.CPUMS - ms(r.cpu0)
	case r.cfg.PID > 0:
		r.res.ServerPeakRSSBytes = peakRSSOf(fmt.Sprint(r.cfg.PID))
		r.res.ServerCPUMS = ms(cpuOf(r.cfg.PID) - r.cpu0)
	}
	r.res.ServerCPUPerTurnMS = r.res.ServerCPUMS / n
	return nil
}

// apiMessage is a message as the API shows it.
type apiMessage struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// verify checks the thread's state (2 × turns messages, each turn's
// human message and answer in order) and the last turn's whole answer.
func (r *w3Run) verify(ctx context.Context, last []byte) error {
	var st struct {
		Values struct {
			Messages []apiMessage `json:"messages"`
		} `json:"values"`
	}
	if err := r.api.call(ctx, http.MethodGet, "/threads/"+r.thread+"/state", nil, &st); err != nil {
		return err
	}
	msgs := st.Values.Messages
	r.res.StateMessages = len(msgs)
	if len(msgs) != 2*r.cfg.Turns {
		return fmt.Errorf("%w: the thread's state has %d messages after %d turns, want %d", ErrCheck, len(msgs), r.cfg.Turns, 2*r.cfg.Turns)
	}
	for i := 1; i <= r.cfg.Turns; i++ {
		if err := checkPair(msgs[2*i-2:2*i], i); err != nil {
			return fmt.Errorf("%w: the thread's state: %w", ErrCheck, err)
		}
	}
	values := last
	if r.series == "stream" {
		if values = lastValues(last); values == nil {
			return fmt.Errorf("%w: the last stream carried no values event: %s", ErrCheck, truncate(string(last), 500))
		}
	}
	var out struct {
		Messages []apiMessage `json:"messages"`
	}
	if err := json.Unmarshal(values, &out); err != nil || len(out.Messages) != 2*r.cfg.Turns {
		return fmt.Errorf("%w: the last answer is not the state of %d messages (%v): %s", ErrCheck, 2*r.cfg.Turns, err, truncate(string(values), 500))
	}
	if err := checkPair(out.Messages[len(out.Messages)-2:], r.cfg.Turns); err != nil {
		return fmt.Errorf("%w: the last answer: %w", ErrCheck, err)
	}
	return nil
}

// checkPair checks that m is turn i's human message and its answer.
func checkPair(m []apiMessage, i int) error {
	var q, a string
	_ = json.Unmarshal(m[0].Content, &q)
	_ = json.Unmarshal(m[1].Content, &a)
	if !isHuman(m[0]) || q != TurnText(i) {
		return fmt.Errorf("message %d is %s %q, want human %q", 2*i-1, m[0].Type, q, TurnText(i))
	}
	if (m[1].Type != "ai" && m[1].Role != "assistant") || a != Answer(TurnText(i)) {
		return fmt.Errorf("message %d is %s %q, want ai %q", 2*i, m[1].Type, a, Answer(TurnText(i)))
	}
	return nil
}

func isHuman(m apiMessage) bool { return m.Type == "human" || m.Role == "user" || m.Role == "human" }

// lastValues is the data of the last values event of an SSE stream.
func lastValues(sse []byte) []byte {
	var event string
	var data []byte
	for line := range bytes.Lines(sse) {
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case bytes.HasPrefix(line, []byte("event:")):
			event = string(bytes.TrimSpace(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")) && event == "values":
			data = bytes.TrimSpace(line[len("data:"):])
		}
	}
	return data
}

// finish stops the bench's server and reads what the store holds.
func (r *w3Run) finish(ctx context.Context) error {
	if r.srv == nil {
		return nil
	}
	err := r.srv.stop()
	r.srv = nil
	if err != nil {
		return err
	}
	after, database, method, err := tableSizes(ctx, r.storeURL)
	if err != nil || after == nil {
		return err
	}
	r.res.Bytes = storeBytes(r.before, after, database, method)
	n := float64(r.cfg.Turns)
	r.res.CheckpointBytesPerTurn = float64(r.res.Bytes.CheckpointBytes) / n
	r.res.OtherBytesPerTurn = float64(r.res.Bytes.OtherBytes) / n
	return nil
}
