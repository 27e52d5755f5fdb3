package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// echoGraph answers its input's "n" in "echo": a stateless run's outcome
// names its own input.
func echoGraph(t *testing.T) *runs.Graph {
	t.Helper()
	g, err := flow.NewGraph(state.MustSchema(state.WithField("echo", state.ReducerReplace))).
		AddNode("echo", func(_ context.Context, s state.Doc) (state.Update, error) {
			var n int
			_ = s.Get("n", &n)
			return state.Update{"echo": fmt.Sprintf("echo %d", n)}, nil
		}).AddEdge(flow.START, "echo").Compile()
	if err != nil {
		t.Fatal(err)
	}
	return &runs.Graph{ID: "echo", Graph: g}
}

// TestStatelessRunsDeliver: stateless runs (POST /runs/wait and
// /runs/stream, no thread) deliver their whole outcome, however fast they
// end and however many run at once; their threads, records and logs are
// gone once delivered.
func TestStatelessRunsDeliver(t *testing.T) {
	st, err := sqlite.OpenStore(context.Background(), filepath.Join(t.TempDir(), "stateless.db"), sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ts := newServer(t, st, echoGraph(t))
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			code, b := ts.do("POST", "/runs/wait", map[string]any{"assistant_id": "echo", "input": map[string]any{"n": i}})
			var out map[string]any
			if code != 200 || json.Unmarshal(b, &out) != nil || out["echo"] != fmt.Sprintf("echo %d", i) {
				errs <- fmt.Errorf("wait %d: %d %s", i, code, b)
			}
		}()
		go func() {
			defer wg.Done()
			evs := ts.stream("POST", "/runs/stream", map[string]any{"assistant_id": "echo", "input": map[string]any{"n": i}}, "", nil)
			want := fmt.Sprintf(`"echo":"echo %d"`, i)
			if len(evs) == 0 || evs[len(evs)-1].Event != "values" || !strings.Contains(string(evs[len(evs)-1].Data), want) {
				errs <- fmt.Errorf("stream %d: %v", i, evs)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rl, err := store.RunLogOf(st)
	if err != nil {
		t.Fatal(err)
	}
	// The threads go one delete each after their outcome was delivered;
	// under -race beside other packages' tests, 400 deletes on SQLite took
	// over 10 s. The test asks that they all go, not how fast: it fails
	// when a minute passes without one going.
	deadline, left := time.Now().Add(time.Minute), -1
	for {
		runs, err := rl.Runs(context.Background(), store.RunQuery{})
		if err != nil {
			t.Fatal(err)
		}
		threads := 0
		for _, err := range st.Threads(context.Background(), store.ThreadFilter{}) {
			if err != nil {
				t.Fatal(err)
			}
			threads++
		}
		if len(runs) == 0 && threads == 0 {
			return
		}
		if n := len(runs) + threads; n != left {
			deadline, left = time.Now().Add(time.Minute), n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs and %d threads left after the stateless runs delivered", len(runs), threads)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWaitServerTiming: a wait's answer ends with a Server-Timing trailer
// that splits the time to the run's outcome from the time its answer took.
func TestWaitServerTiming(t *testing.T) {
	ts := newServer(t, inmem.Open(store.Options{}), echoGraph(t))
	res, err := http.Post(ts.url+"/runs/wait", "application/json", strings.NewReader(`{"assistant_id": "echo", "input": {"n": 7}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(b), `"echo":"echo 7"`) {
		t.Fatalf("answer: %s", b)
	}
	st := res.Trailer.Get("Server-Timing")
	var run, answer float64
	if _, err := fmt.Sscanf(st, "run;dur=%g, answer;dur=%g", &run, &answer); err != nil || run <= 0 || answer < 0 {
		t.Fatalf("Server-Timing trailer %q: %v", st, err)
	}
}
