package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// childArgsEnv, when set to a JSON list of arguments, makes the test
// binary the bench's server process (ServeMain) instead of running tests.
const childArgsEnv = "CAIRN_BENCH_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childArgsEnv); args != "" {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil || len(argv) == 0 || argv[0] != ServeCommand {
			os.Stderr.WriteString(childArgsEnv + ": want [\"" + ServeCommand + "\", flags…]\n")
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := serveMain(ctx, argv[1:], os.Stdout, faults(os.Getenv(faultEnv)))
		stop()
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// faultEnv, when set to a route ("POST /threads/count"), makes the test
// server process answer that route 504, as the server does past its
// request timeout.
const faultEnv = "CAIRN_BENCH_CHILD_FAULT"

func faults(route string) func(http.Handler) http.Handler {
	if route == "" {
		return nil
	}
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method+" "+r.URL.Path == route {
				http.Error(w, `{"detail": "context deadline exceeded"}`, http.StatusGatewayTimeout)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}

// faultyProgram is testProgram with a route that fails.
func faultyProgram(route string) Program {
	return func(args ...string) *exec.Cmd {
		cmd := testProgram(args...)
		cmd.Env = append(cmd.Env, faultEnv+"="+route)
		return cmd
	}
}

// testProgram runs this test binary as the bench's server process.
func testProgram(args ...string) *exec.Cmd {
	b, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(b))
	return cmd
}

// TestW3 runs W3's two series against the bench's own server process, on
// SQLite and (with CAIRN_TEST_POSTGRES) PostgreSQL, and checks that every
// figure W3 names is there and sane.
func TestW3(t *testing.T) {
	stores := []struct{ name, url string }{{"sqlite", ""}}
	if os.Getenv(pgtest.Env) != "" {
		dsn, _ := pgtest.Schema(t, "bench_w3")
		stores = append(stores, struct{ name, url string }{"postgres", dsn})
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			prof := filepath.Join(t.TempDir(), "cpu")
			var progress bytes.Buffer
			res, err := RunW3(context.Background(), W3Config{Turns: 20, Store: st.url, Program: testProgram, CPUProfile: prof, Progress: &progress})
			if err != nil {
				t.Fatal(err)
			}
			if res.Workload != "w3" || res.Assistant != ChatAssistantID || res.Turns != 20 || len(res.Series) != 2 {
				t.Fatalf("result %+v", res)
			}
			for i, s := range res.Series {
				checkW3Series(t, s, []string{"wait", "stream"}[i], prof)
			}
			if strings.Count(progress.String(), "\n") != 20 {
				t.Errorf("progress: %q", progress.String())
			}
		})
	}
}

func checkW3Series(t *testing.T, s W3Series, series, prof string) {
	t.Helper()
	if s.Series != series || s.Connections != 1 || s.StateMessages != 40 || s.LastAnswerBytes == 0 || s.TotalS <= 0 {
		t.Errorf("%s: %+v", series, s)
	}
	l, sv := s.Latency, s.Server
	if l == nil || sv == nil {
		t.Fatalf("%s: latency %v, server %v", series, l, sv)
	}
	// Each turn's handler runs within the client's turn, so each of the
	// server's quantiles is at most the client's.
	if l.P50 <= 0 || l.P99 < l.P50 || l.Max < l.P99 || l.First10 <= 0 || l.Ratio <= 0 || sv.P50 <= 0 || sv.P50 > l.P50 || sv.Max > l.Max {
		t.Errorf("%s: latency %+v, server %+v", series, *l, *sv)
	}
	// A wait's Server-Timing trailer splits the server's time; a stream
	// has none.
	if (series == "wait") != (s.Run != nil && s.Answer != nil) || (s.Run != nil && (s.Run.P50 <= 0 || s.Run.P50 > sv.P50 || s.Answer.Max <= 0)) {
		t.Errorf("%s: run %+v, answer %+v, handler %+v", series, s.Run, s.Answer, *sv)
	}
	b := s.Bytes
	if b == nil || b.CheckpointBytes <= 0 || b.OtherBytes <= 0 || b.DatabaseBytes <= 0 || s.CheckpointBytesPerTurn != float64(b.CheckpointBytes)/20 {
		t.Fatalf("%s: store bytes %+v", series, b)
	}
	kinds := map[string]string{}
	for _, tb := range b.Tables {
		kinds[strings.TrimPrefix(tb.Table, "cairn_")] = tb.Kind
	}
	if kinds["checkpoints"] != "checkpoints" || kinds["snapshots"] != "checkpoints" || kinds["runs"] != "other" {
		t.Errorf("%s: tables %+v", series, b.Tables)
	}
	if s.ServerPeakRSSBytes <= 0 || s.ServerCPUMS <= 0 {
		t.Errorf("%s: server RSS %d, CPU %.1f ms", series, s.ServerPeakRSSBytes, s.ServerCPUMS)
	}
	if fi, err := os.Stat(prof + "." + series); err != nil || fi.Size() == 0 || s.CPUProfile != prof+"."+series {
		t.Errorf("%s: CPU profile %s: %v", series, s.CPUProfile, err)
	}
}

// A server whose answers or state are wrong fails W3 loudly, whichever
// series; a thread left on the bench's store is refused.
func TestW3Checks(t *testing.T) {
	wrong := func(_ context.Context, d state.Doc) (state.Update, error) {
		return state.Update{"messages": []state.Message{{Type: "ai", Content: "no idea"}}}, nil
	}
	forgetful := func(_ context.Context, d state.Doc) (state.Update, error) {
		text, err := lastHuman(d)
		return state.Update{"messages": []state.Message{{Type: "ai", Content: Answer(text)}}}, err
	}
	for _, tc := range []struct {
		name    string
		reducer string
		node    flow.NodeFunc
		series  string
		want    string
	}{
		{"wrong answer, wait", state.ReducerMessages, wrong, "wait", "lacks the assistant's reply"},
		{"wrong answer, stream", state.ReducerMessages, wrong, "stream", "lacks the assistant's reply"},
		{"state not kept", state.ReducerReplace, forgetful, "wait", "the thread's state has 1 messages after 3 turns, want 6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := serveGraph(t, tc.reducer, tc.node)
			_, err := RunW3(context.Background(), W3Config{Turns: 3, Series: []string{tc.series}, URL: url})
			if !errors.Is(err, ErrCheck) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrCheck with %q", err, tc.want)
			}
		})
	}
	// The same server, right: W3 passes through an external URL, twice
	// (the second run deletes the thread the first left).
	url := serveGraph(t, state.ReducerMessages, chatNode)
	for range 2 {
		res, err := RunW3(context.Background(), W3Config{Turns: 3, Series: []string{"wait"}, URL: url})
		if err != nil {
			t.Fatal(err)
		}
		if s := res.Series[0]; s.Server != nil || s.Bytes != nil || s.StateMessages != 6 || s.Latency == nil {
			t.Fatalf("external: %+v", s)
		}
	}
	// The bench's own store must not hold the thread yet.
	dbURL := "sqlite:" + filepath.Join(t.TempDir(), "w3.db")
	if _, err := RunW3(context.Background(), W3Config{Turns: 2, Series: []string{"wait"}, Store: dbURL, Program: testProgram}); err != nil {
		t.Fatal(err)
	}
	_, err := RunW3(context.Background(), W3Config{Turns: 2, Series: []string{"wait"}, Store: dbURL, Program: testProgram})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second run on the same store: %v", err)
	}
}

// serveGraph serves a one-node chat graph (field messages under reducer,
// node agent) as assistant chat in this process, and returns its URL.
func serveGraph(t *testing.T, reducer string, node flow.NodeFunc) string {
	t.Helper()
	g, err := flow.NewGraph(state.MustSchema(state.WithField("messages", reducer))).AddNode("agent", node).AddEdge(flow.START, "agent").Compile()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: inmem.Open(store.Options{}), Assistants: []runs.Assistant{&runs.Graph{ID: ChatAssistantID, Graph: g}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL
}

func TestW3Config(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  W3Config
	}{
		{"negative turns", W3Config{Turns: -1}},
		{"unknown series", W3Config{Series: []string{"poll"}}},
		{"pid without url", W3Config{PID: 1}},
		{"other assistant on the bench's server", W3Config{Assistant: "other"}},
		{"store with url", W3Config{URL: "http://127.0.0.1:1", Store: "memory:"}},
		{"profile with url", W3Config{URL: "http://127.0.0.1:1", CPUProfile: "cpu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := RunW3(context.Background(), tc.cfg); !errors.Is(err, store.ErrInvalidArgument) {
				t.Fatalf("err %v", err)
			}
		})
	}
	if _, err := RunW3(context.Background(), W3Config{Turns: 1, Series: []string{"wait"}}); !errors.Is(err, ErrServer) {
		t.Fatalf("no program: %v", err)
	}
}

func TestServeArgs(t *testing.T) {
	for _, args := range [][]string{nil, {"--addr", ":0"}, {"--store", "memory:", "extra"}, {"--nope"}} {
		if _, err := ParseServeArgs(args); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%q: %v", args, err)
		}
	}
	c, err := ParseServeArgs([]string{"--store", "memory:", "--cpuprofile", "f"})
	if err != nil || c.Store != "memory:" || c.Addr != "127.0.0.1:0" || c.CPUProfile != "f" {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestChatNode(t *testing.T) {
	if a := Answer(TurnText(7)); len(a) != 200 || !strings.HasPrefix(a, "You said: turn 7: hello, how are you today?. x") {
		t.Fatalf("answer %q", a)
	}
	long := strings.Repeat("y", 300)
	if Answer(long) != "You said: "+long+". " {
		t.Fatal("a long text is cut")
	}
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
	for _, tc := range []struct {
		name string
		msgs []state.Message
		want string
	}{
		{"human last", []state.Message{{Type: "ai", Content: "a"}, {Type: "human", Content: "q"}}, "q"},
		{"role user, an answer after", []state.Message{{Role: "user", Content: "q1"}, {Type: "ai", Content: "a"}}, "q1"},
		{"none", []state.Message{{Type: "ai", Content: "a"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _, err := schema.Apply(state.EmptyDoc(), state.Update{"messages": tc.msgs})
			if err != nil {
				t.Fatal(err)
			}
			got, err := lastHuman(d)
			if (err != nil) != (tc.want == "") || got != tc.want {
				t.Fatalf("lastHuman = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
