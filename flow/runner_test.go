package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/flow/baserules"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

var schema = state.MustSchema(
	state.WithField("log", state.ReducerAppend),
	state.WithField("count", state.ReducerAdd),
	state.WithField("messages", state.ReducerMessages),
)

// logNode appends its name to the log and adds one to count.
func logNode(name string) flow.NodeFunc {
	return func(ctx context.Context, s state.Doc) (state.Update, error) {
		return state.Update{"log": name, "count": 1}, nil
	}
}

func newRunner(t *testing.T, g *flow.Graph, s store.Store, opts flow.Options) *flow.Runner {
	t.Helper()
	c, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	r, err := flow.NewRunner(c, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// oneNode returns a runner of the graph START → name (a logNode) → END.
func oneNode(t *testing.T, name string, s store.Store, opts flow.Options) *flow.Runner {
	t.Helper()
	g := flow.NewGraph(schema)
	g.AddNode(name, logNode(name))
	g.AddEdge(flow.START, name)
	return newRunner(t, g, s, opts)
}

func logOf(t *testing.T, d state.Doc) []string {
	t.Helper()
	var log []string
	if d.Has("log") {
		if err := d.Get("log", &log); err != nil {
			t.Fatal(err)
		}
	}
	return log
}

func history(t *testing.T, s store.Store, thread string) []store.Checkpoint {
	t.Helper()
	var out []store.Checkpoint
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: thread}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append([]store.Checkpoint{cp}, out...)
	}
	return out
}

func TestChain(t *testing.T) {
	s := inmem.Open(store.Options{})
	g := flow.NewGraph(schema).AddNode("a", logNode("a")).AddNode("b", logNode("b")).AddNode("c", logNode("c")).Chain("a", "b", "c")
	r := newRunner(t, g, s, flow.Options{})
	res, err := r.Invoke(context.Background(), "t", state.Update{"log": "in"})
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != state.StopSuccess || res.Progress.Steps != 3 || res.Head != 4 {
		t.Fatalf("result %+v", res)
	}
	if got := logOf(t, res.State); !slices.Equal(got, []string{"in", "a", "b", "c"}) {
		t.Fatalf("log %v", got)
	}
	h := history(t, s, "t")
	var nodes []string
	for _, cp := range h {
		nodes = append(nodes, strings.Join(cp.Nodes, ","))
	}
	if strings.Join(nodes, " ") != "__start__ a b c" || h[0].Meta.Next[0] != "a" || len(h[3].Meta.Next) != 0 {
		t.Fatalf("history nodes %v, first next %v", nodes, h[0].Meta.Next)
	}
	// A second invocation on the same thread continues its state.
	res, err = r.Invoke(context.Background(), "t", state.Update{"log": "again"})
	if err != nil || res.Head != 8 || len(logOf(t, res.State)) != 8 {
		t.Fatalf("second invoke: %+v %v", res, err)
	}
}

func TestRouterLoopAndFanOut(t *testing.T) {
	s := inmem.Open(store.Options{})
	g := flow.NewGraph(schema).
		AddNode("step", logNode("step")).
		AddNode("left", logNode("left")).AddNode("right", logNode("right")).AddNode("join", logNode("join")).
		AddEdge(flow.START, "step").
		AddRouter("step", func(ctx context.Context, d state.Doc) ([]flow.Target, error) {
			var n int
			if err := d.Get("count", &n); err != nil {
				return nil, err
			}
			if n < 3 {
				return flow.To("step"), nil
			}
			return flow.To("left", "right"), nil
		}).
		AddEdge("left", "join").AddEdge("right", "join").AddEdge("join", flow.END)
	r := newRunner(t, g, s, flow.Options{})
	res, err := r.Invoke(context.Background(), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	// left and right run in one step, merged in schedule order; join runs once.
	if got := logOf(t, res.State); !slices.Equal(got, []string{"step", "step", "step", "left", "right", "join"}) {
		t.Fatalf("log %v", got)
	}
	h := history(t, s, "t")
	if got := h[4].Nodes; !slices.Equal(got, []string{"left", "right"}) {
		t.Fatalf("parallel step nodes %v", got)
	}
}

func TestSendMapReduce(t *testing.T) {
	s := inmem.Open(store.Options{})
	g := flow.NewGraph(schema).
		AddNode("split", func(ctx context.Context, d state.Doc) (state.Update, error) { return nil, nil }).
		AddNode("worker", func(ctx context.Context, d state.Doc) (state.Update, error) {
			var word string
			if err := json.Unmarshal(flow.Input(ctx), &word); err != nil {
				return nil, err
			}
			info, _ := flow.Info(ctx)
			return state.Update{"log": strings.ToUpper(word) + "@" + info.Key[strings.LastIndex(info.Key, "/")+1:]}, nil
		}).
		AddNode("reduce", logNode("reduce")).
		AddEdge(flow.START, "split").
		AddRouter("split", func(ctx context.Context, d state.Doc) ([]flow.Target, error) {
			var ts []flow.Target
			for _, w := range []string{"a", "b", "c"} {
				t, err := flow.Send("worker", w)
				if err != nil {
					return nil, err
				}
				ts = append(ts, t)
			}
			return ts, nil
		}).
		AddEdge("worker", "reduce").AddEdge("reduce", flow.END)
	r := newRunner(t, g, s, flow.Options{})
	res, err := r.Invoke(context.Background(), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := logOf(t, res.State); !slices.Equal(got, []string{"A@worker#0", "B@worker#1", "C@worker#2", "reduce"}) {
		t.Fatalf("log %v", got)
	}
	// The scheduled Sends were stored with their inputs.
	h := history(t, s, "t")
	if len(h[1].Meta.Tasks) != 3 || string(h[1].Meta.Tasks[2].Input) != `"c"` {
		t.Fatalf("stored tasks %+v", h[1].Meta.Tasks)
	}
}

func TestFailedSiblingKeptAsPendingWrite(t *testing.T) {
	s := inmem.Open(store.Options{})
	var aRuns, bRuns atomic.Int32
	var keys sync.Map
	g := flow.NewGraph(schema).
		AddNode("a", func(ctx context.Context, d state.Doc) (state.Update, error) {
			aRuns.Add(1)
			info, _ := flow.Info(ctx)
			keys.Store("a", info.Key)
			return state.Update{"log": "a"}, nil
		}).
		AddNode("b", func(ctx context.Context, d state.Doc) (state.Update, error) {
			info, _ := flow.Info(ctx)
			if prev, ok := keys.Load("b"); ok && prev != info.Key {
				return nil, fmt.Errorf("key changed: %v → %v", prev, info.Key)
			}
			keys.Store("b", info.Key)
			if bRuns.Add(1) == 1 {
				return nil, errors.New("tool timed out")
			}
			return state.Update{"log": "b"}, nil
		}).
		AddNode("c", logNode("c")).
		AddEdge(flow.START, "a").AddEdge(flow.START, "b").AddEdge("a", "c").AddEdge("b", "c").AddEdge("c", flow.END)
	r := newRunner(t, g, s, flow.Options{})
	res, err := r.Invoke(context.Background(), "t", nil)
	var ne *flow.NodeError
	if !errors.As(err, &ne) || ne.Node != "b" || res.StopReason != state.StopUnrecoverableError {
		t.Fatalf("first run: %+v, %v", res, err)
	}
	h := history(t, s, "t")
	last := h[len(h)-1]
	if last.Status != store.StatusFailed || !strings.Contains(last.Meta.Error, "tool timed out") || last.Meta.StepOf != 1 || len(last.Patch) != 0 {
		t.Fatalf("failed checkpoint %+v", last)
	}
	res, err = r.Resume(context.Background(), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if aRuns.Load() != 1 || bRuns.Load() != 2 {
		t.Fatalf("a ran %d times, b %d", aRuns.Load(), bRuns.Load())
	}
	if got := logOf(t, res.State); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("log %v", got)
	}
}

func TestRetry(t *testing.T) {
	s := inmem.Open(store.Options{})
	var calls atomic.Int32
	flaky := func(ctx context.Context, d state.Doc) (state.Update, error) {
		info, _ := flow.Info(ctx)
		if calls.Add(1) < 3 {
			return nil, fmt.Errorf("attempt %d: 503", info.Attempt)
		}
		return state.Update{"log": fmt.Sprint("ok on ", info.Attempt)}, nil
	}
	g := flow.NewGraph(schema).AddNode("f", flaky, flow.WithRetry(flow.RetryPolicy{Attempts: 3, Initial: time.Millisecond})).Chain("f")
	r := newRunner(t, g, s, flow.Options{})
	res, err := r.Invoke(context.Background(), "t", nil)
	if err != nil || !slices.Equal(logOf(t, res.State), []string{"ok on 3"}) {
		t.Fatalf("%v %v", logOf(t, res.State), err)
	}
	// Not retryable: one attempt.
	calls.Store(0)
	g = flow.NewGraph(schema).AddNode("f", flaky, flow.WithRetry(flow.RetryPolicy{Attempts: 3, Initial: time.Millisecond, Retryable: func(error) bool { return false }})).Chain("f")
	r = newRunner(t, g, s, flow.Options{})
	_, err = r.Invoke(context.Background(), "t2", nil)
	var ne *flow.NodeError
	if !errors.As(err, &ne) || ne.Attempts != 1 {
		t.Fatalf("non-retryable: %v", err)
	}
}

func TestInterrupt(t *testing.T) {
	s := inmem.Open(store.Options{})
	var runs atomic.Int32
	g := flow.NewGraph(schema).
		AddNode("draft", logNode("draft")).
		AddNode("approve", func(ctx context.Context, d state.Doc) (state.Update, error) {
			runs.Add(1)
			var answer struct{ OK bool }
			if err := flow.Interrupt(ctx, map[string]string{"question": "publish?"}, &answer); err != nil {
				return nil, err
			}
			return state.Update{"log": fmt.Sprint("approved=", answer.OK)}, nil
		}).
		AddNode("publish", logNode("publish")).
		Chain("draft", "approve", "publish")
	r := newRunner(t, g, s, flow.Options{})
	res, err := r.Invoke(context.Background(), "t", nil)
	if err != nil || res.StopReason != state.StopInterrupt || string(res.Interrupt) != `{"question":"publish?"}` {
		t.Fatalf("interrupt: %+v %v", res, err)
	}
	h := history(t, s, "t")
	last := h[len(h)-1]
	if last.Status != store.StatusInterrupted || !strings.Contains(string(last.Meta.Interrupt), "publish?") || last.Meta.Next[0] != "approve" {
		t.Fatalf("interrupt checkpoint %+v", last)
	}
	res, err = r.Resume(context.Background(), "t", map[string]bool{"OK": true})
	if err != nil || res.StopReason != state.StopSuccess {
		t.Fatalf("resume: %+v %v", res, err)
	}
	if got := logOf(t, res.State); !slices.Equal(got, []string{"draft", "approved=true", "publish"}) || runs.Load() != 2 {
		t.Fatalf("log %v, approve ran %d times", got, runs.Load())
	}
}

func TestStaticInterrupts(t *testing.T) {
	s := inmem.Open(store.Options{})
	g := flow.NewGraph(schema).AddNode("a", logNode("a")).AddNode("b", logNode("b")).AddNode("c", logNode("c")).Chain("a", "b", "c")
	r := newRunner(t, g, s, flow.Options{InterruptBefore: []string{"b"}, InterruptAfter: []string{"b"}})
	res, err := r.Invoke(context.Background(), "t", nil)
	if err != nil || res.StopReason != state.StopInterrupt || !slices.Equal(logOf(t, res.State), []string{"a"}) {
		t.Fatalf("before: %+v %v", logOf(t, res.State), err)
	}
	res, err = r.Resume(context.Background(), "t", nil)
	if err != nil || res.StopReason != state.StopInterrupt || !slices.Equal(logOf(t, res.State), []string{"a", "b"}) {
		t.Fatalf("after: %v %v %v", logOf(t, res.State), res.StopReason, err)
	}
	res, err = r.Resume(context.Background(), "t", nil)
	if err != nil || res.StopReason != state.StopSuccess || !slices.Equal(logOf(t, res.State), []string{"a", "b", "c"}) {
		t.Fatalf("end: %v %v %v", logOf(t, res.State), res.StopReason, err)
	}
	if _, err := flow.NewRunner(mustCompile(t, g), s, flow.Options{InterruptBefore: []string{"zz"}}); !errors.Is(err, flow.ErrInvalidGraph) {
		t.Fatalf("unknown interrupt node: %v", err)
	}
}

func mustCompile(t *testing.T, g *flow.Graph) *flow.Compiled {
	c, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func forever(name string) *flow.Graph {
	return flow.NewGraph(schema).AddNode(name, func(ctx context.Context, d state.Doc) (state.Update, error) {
		flow.AddTokens(ctx, 10, 5)
		return state.Update{"count": 1}, nil
	}).AddEdge(flow.START, name).AddEdge(name, name)
}

func TestBudgetsAndStops(t *testing.T) {
	now := time.Unix(0, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now }
	tests := []struct {
		name  string
		g     *flow.Graph
		opts  flow.Options
		ro    flow.RunOptions
		input state.Update
		want  state.StopReason
		steps int
	}{
		{"steps", forever("n"), flow.Options{Budget: flow.Budget{MaxSteps: 4}}, flow.RunOptions{}, nil, state.StopBudgetSteps, 4},
		{"task overrides steps", forever("n"), flow.Options{Budget: flow.Budget{MaxSteps: 4}}, flow.RunOptions{Budget: flow.Budget{MaxSteps: 2}}, nil, state.StopBudgetSteps, 2},
		{"tokens", forever("n"), flow.Options{Budget: flow.Budget{MaxTokens: 40}}, flow.RunOptions{}, nil, state.StopBudgetTokens, 3},
		{"time", forever("n"), flow.Options{Budget: flow.Budget{MaxRuntime: 5 * time.Second}, Now: clock}, flow.RunOptions{}, nil, state.StopBudgetTime, 0},
		{"custom", forever("n"), flow.Options{StopWhen: []flow.StopCriterion{func(d state.Doc, p flow.Progress) (state.StopReason, bool) {
			return state.StopStagnation, p.Steps >= 3
		}}}, flow.RunOptions{}, nil, state.StopStagnation, 3},
		{"final result", flow.NewGraph(schema).AddNode("n", func(ctx context.Context, d state.Doc) (state.Update, error) {
			return state.Update{"final_result": "42"}, nil
		}).AddEdge(flow.START, "n").AddEdge("n", "n").WithRules(baserules.Rules()), flow.Options{}, flow.RunOptions{}, nil, state.StopFinal, 1},
		// The runner knows no field names: without the rules, final_result
		// is a field like any other and the loop runs to the step limit.
		{"final result without rules", flow.NewGraph(schema).AddNode("n", func(ctx context.Context, d state.Doc) (state.Update, error) {
			return state.Update{"final_result": "42"}, nil
		}).AddEdge(flow.START, "n").AddEdge("n", "n"), flow.Options{}, flow.RunOptions{}, nil, state.StopRecursionLimit, flow.DefaultRecursionLimit},
		{"stop reason in state", flow.NewGraph(schema).AddNode("n", func(ctx context.Context, d state.Doc) (state.Update, error) {
			u, err := state.StopUpdate(state.StopEnvTerminal)
			return u, err
		}).AddEdge(flow.START, "n").AddEdge("n", "n"), flow.Options{Rules: []flow.Rules{baserules.Rules()}}, flow.RunOptions{}, nil, state.StopEnvTerminal, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t, tc.g, inmem.Open(store.Options{}), tc.opts)
			res, err := r.Invoke(context.Background(), "t", tc.input, tc.ro)
			if err != nil || res.StopReason != tc.want {
				t.Fatalf("stop %q, %v; want %q", res.StopReason, err, tc.want)
			}
			if tc.steps > 0 && res.Progress.Steps != tc.steps {
				t.Fatalf("%d steps, want %d", res.Progress.Steps, tc.steps)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	s := inmem.Open(store.Options{})
	started := make(chan struct{})
	g := flow.NewGraph(schema).AddNode("a", logNode("a")).AddNode("slow", func(ctx context.Context, d state.Doc) (state.Update, error) {
		close(started)
		<-ctx.Done()
		return state.Update{"log": "too late"}, nil
	}).Chain("a", "slow")
	r := newRunner(t, g, s, flow.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	res, err := r.Invoke(ctx, "t", nil)
	if !errors.Is(err, context.Canceled) || res.StopReason != state.StopCancelledImmediate {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	head, err := s.Load(context.Background(), store.LoadRequest{Thread: "t"})
	if err != nil || head.Seq != 2 || !slices.Equal(logOf(t, head.State), []string{"a"}) {
		t.Fatalf("after cancel head %d %v %v", head.Seq, logOf(t, head.State), err)
	}
	// The cancelled step runs again on resume.
	g2 := flow.NewGraph(schema).AddNode("a", logNode("a")).AddNode("slow", logNode("slow")).Chain("a", "slow")
	res, err = newRunner(t, g2, s, flow.Options{}).Resume(context.Background(), "t", nil)
	if err != nil || !slices.Equal(logOf(t, res.State), []string{"a", "slow"}) {
		t.Fatalf("resume after cancel: %v %v", logOf(t, res.State), err)
	}
}

func TestDurabilityModes(t *testing.T) {
	build := func() *flow.Graph {
		return flow.NewGraph(schema).AddNode("n", logNode("n")).AddEdge(flow.START, "n").
			AddRouter("n", func(ctx context.Context, d state.Doc) ([]flow.Target, error) {
				var c int
				_ = d.Get("count", &c)
				if c < 20 {
					return flow.To("n"), nil
				}
				return nil, nil
			})
	}
	var want string
	for _, d := range []flow.Durability{flow.DurabilitySync, flow.DurabilityAsync, flow.DurabilityExit} {
		s := inmem.Open(store.Options{})
		r := newRunner(t, build(), s, flow.Options{Durability: d})
		res, err := r.Invoke(context.Background(), "t", nil)
		if err != nil || res.Progress.Steps != 20 {
			t.Fatalf("%s: %+v %v", d, res, err)
		}
		head, err := s.Load(context.Background(), store.LoadRequest{Thread: "t"})
		if err != nil {
			t.Fatal(err)
		}
		if want == "" {
			want = head.State.String()
		}
		if head.State.String() != want || head.Seq != res.Head {
			t.Fatalf("%s: stored head %d %s, result head %d", d, head.Seq, head.State, res.Head)
		}
		n := len(history(t, s, "t"))
		switch d {
		case flow.DurabilityExit:
			if n != 1 || head.Meta.StopReason != "success" {
				t.Fatalf("exit: %d checkpoints, stop %q", n, head.Meta.StopReason)
			}
		default:
			if n != 21 {
				t.Fatalf("%s: %d checkpoints", d, n)
			}
		}
	}
	if _, err := flow.ParseDurability("eventually"); err == nil {
		t.Fatal("bad durability accepted")
	}
}

func TestOneWriterPerThread(t *testing.T) {
	s := inmem.Open(store.Options{})
	release := make(chan struct{})
	var entered atomic.Int32
	g := flow.NewGraph(schema).AddNode("a", logNode("a")).AddNode("b", func(ctx context.Context, d state.Doc) (state.Update, error) {
		if entered.Add(1) == 2 {
			close(release)
		}
		<-release
		return state.Update{"log": "b"}, nil
	}).Chain("a", "b")
	stopAt := newRunner(t, g, s, flow.Options{InterruptBefore: []string{"b"}})
	if _, err := stopAt.Invoke(context.Background(), "t", nil); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, g, s, flow.Options{})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = r.Resume(context.Background(), "t", nil) }()
	}
	wg.Wait()
	ok, conflicts := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, store.ErrConflict):
			conflicts++
		default:
			t.Fatalf("unexpected: %v", err)
		}
	}
	if ok != 1 || conflicts != 1 {
		t.Fatalf("%d ok, %d conflicts", ok, conflicts)
	}
	if got := logOf(t, history(t, s, "t")[len(history(t, s, "t"))-1].State); len(got) > 2 {
		t.Fatalf("log %v", got)
	}
}

func TestUpdateStateAndReplay(t *testing.T) {
	s := inmem.Open(store.Options{})
	g := flow.NewGraph(schema).AddNode("a", logNode("a")).AddNode("b", logNode("b")).AddNode("c", logNode("c")).Chain("a", "b", "c")
	r := newRunner(t, g, s, flow.Options{InterruptBefore: []string{"c"}})
	if _, err := r.Invoke(context.Background(), "t", nil); err != nil {
		t.Fatal(err)
	}
	// A human edits the state as if b had written it: c is next.
	cp, err := r.UpdateState(context.Background(), "t", state.Update{"log": "human"}, "b")
	if err != nil || cp.Nodes[0] != "b" || cp.Meta.Next[0] != "c" {
		t.Fatalf("update state: %+v %v", cp, err)
	}
	free := newRunner(t, g, s, flow.Options{})
	res, err := free.Resume(context.Background(), "t", nil)
	if err != nil || !slices.Equal(logOf(t, res.State), []string{"a", "b", "human", "c"}) {
		t.Fatalf("after update: %v %v", logOf(t, res.State), err)
	}
	// Replay from checkpoint 2 (after a) with a changed state: a new branch.
	change, _ := state.ParsePatch([]byte(`[{"op":"add","path":"/log/-","value":"edited"}]`))
	res, err = free.RunFrom(context.Background(), "t", 2, change)
	if err != nil || !slices.Equal(logOf(t, res.State), []string{"a", "edited", "b", "c"}) {
		t.Fatalf("replay: %v %v", logOf(t, res.State), err)
	}
	h := history(t, s, "t")
	var forkParent int64
	for _, cp := range h {
		if cp.Meta.Source == "fork" {
			forkParent = cp.Parent
		}
	}
	if forkParent != 2 {
		t.Fatalf("fork parent %d", forkParent)
	}
	if _, err := r.UpdateState(context.Background(), "t", nil, "zz"); !errors.Is(err, flow.ErrInvalidGraph) {
		t.Fatalf("unknown node: %v", err)
	}
}

func TestCompileErrors(t *testing.T) {
	noop := logNode("x")
	tests := []struct {
		name string
		g    *flow.Graph
		want string
	}{
		{"unknown target", flow.NewGraph(nil).AddNode("a", noop).AddEdge(flow.START, "a").AddEdge("a", "zz"), `unknown node "zz"`},
		{"unreachable", flow.NewGraph(nil).AddNode("a", noop).AddNode("b", noop).AddEdge(flow.START, "a"), `"b" cannot be reached`},
		{"no start", flow.NewGraph(nil).AddNode("a", noop), "nothing follows START"},
		{"reserved", flow.NewGraph(nil).AddNode(flow.END, noop), "reserved"},
		{"duplicate", flow.NewGraph(nil).AddNode("a", noop).AddNode("a", noop).AddEdge(flow.START, "a"), "added twice"},
		{"into start", flow.NewGraph(nil).AddNode("a", noop).AddEdge(flow.START, "a").AddEdge("a", flow.START), "into START"},
	}
	for _, tc := range tests {
		_, err := tc.g.Compile()
		if !errors.Is(err, flow.ErrInvalidGraph) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// A router choosing an unknown node fails the run with a clear error.
	g := flow.NewGraph(schema).AddNode("a", noop).AddEdge(flow.START, "a").AddRouter("a", func(context.Context, state.Doc) ([]flow.Target, error) {
		return flow.To("ghost"), nil
	})
	_, err := newRunner(t, g, inmem.Open(store.Options{}), flow.Options{}).Invoke(context.Background(), "t", nil)
	if !errors.Is(err, flow.ErrInvalidGraph) || !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("router to unknown: %v", err)
	}
}

func TestEventsAndPanics(t *testing.T) {
	var mu sync.Mutex
	var kinds []string
	obs := func(e flow.Event) { mu.Lock(); kinds = append(kinds, string(e.Kind)+":"+e.Node); mu.Unlock() }
	g := flow.NewGraph(schema).AddNode("a", logNode("a")).AddNode("boom", func(context.Context, state.Doc) (state.Update, error) {
		panic("nil map")
	}).Chain("a", "boom")
	r := newRunner(t, g, inmem.Open(store.Options{}), flow.Options{Observer: obs})
	_, err := r.Invoke(context.Background(), "t", nil)
	if !errors.Is(err, flow.ErrNodeFailed) || !strings.Contains(err.Error(), "panic: nil map") {
		t.Fatalf("panic: %v", err)
	}
	got := strings.Join(kinds, " ")
	for _, w := range []string{"run_start:", "step_start:", "node_start:a", "node_end:a", "step_end:", "node_end:boom", "error:", "run_end:"} {
		if !strings.Contains(got, w) {
			t.Fatalf("events %s lack %s", got, w)
		}
	}
}

func TestDeterministicMessageIDs(t *testing.T) {
	run := func() string {
		s := inmem.Open(store.Options{})
		g := flow.NewGraph(schema).AddNode("say", func(context.Context, state.Doc) (state.Update, error) {
			return state.Update{"messages": state.Message{Role: "assistant", Content: "hi"}}, nil
		}).Chain("say")
		res, err := newRunner(t, g, s, flow.Options{}).Invoke(context.Background(), "t", state.Update{"messages": state.Message{Role: "user", Content: "hello"}})
		if err != nil {
			t.Fatal(err)
		}
		return res.State.String()
	}
	a, b := run(), run()
	if a != b || !strings.Contains(a, `"id":"t/1/say/1"`) {
		t.Fatalf("ids differ or unexpected:\n%s\n%s", a, b)
	}
}

func TestQitOSStepCounter(t *testing.T) {
	typed, err := state.NewTyped[struct {
		state.Base
		Notes []string `json:"notes" cairn:"append"`
	}]()
	if err != nil {
		t.Fatal(err)
	}
	g := flow.NewGraph(typed.Schema()).AddNode("think", func(ctx context.Context, d state.Doc) (state.Update, error) {
		return state.Update{"notes": "n"}, nil
	}).AddEdge(flow.START, "think").AddEdge("think", "think").WithRules(baserules.Rules())
	var tokens int
	r := newRunner(t, g, inmem.Open(store.Options{}), flow.Options{Observer: func(e flow.Event) {
		if e.Kind == flow.EventStepEnd && !strings.Contains(string(e.Payload), "/current_step") {
			t.Errorf("step_end payload %s lacks the counter", e.Payload)
		}
		if e.Kind == flow.EventTokens {
			tokens++
		}
	}})
	in := state.Update{"task": "think", "max_steps": 3, "current_step": 0}
	res, err := r.Invoke(context.Background(), "t", in)
	if err != nil || res.StopReason != state.StopMaxSteps || res.Progress.Steps != 3 {
		t.Fatalf("%+v %v", res, err)
	}
	s, err := typed.Decode(res.State)
	if err != nil || s.CurrentStep != 3 || len(s.Notes) != 3 {
		t.Fatalf("state %+v %v", s, err)
	}
	if tokens != 0 {
		t.Fatalf("%d token events without tokens", tokens)
	}
}

func TestTypedNodes(t *testing.T) {
	type counter struct {
		Count int      `json:"count" cairn:"add"`
		Log   []string `json:"log" cairn:"append"`
	}
	typed, err := state.NewTyped[counter]()
	if err != nil {
		t.Fatal(err)
	}
	var updates []string
	g := flow.NewGraph(typed.Schema()).
		AddNode("inc", flow.TypedNode(typed, func(ctx context.Context, s counter) (state.Update, error) {
			return state.Update{"count": 1, "log": fmt.Sprint("saw ", s.Count)}, nil
		})).
		AddEdge(flow.START, "inc").
		AddRouter("inc", flow.TypedRoute(typed, func(ctx context.Context, s counter) ([]flow.Target, error) {
			if s.Count < 3 {
				return flow.To("inc"), nil
			}
			return nil, nil
		}))
	r := newRunner(t, g, inmem.Open(store.Options{}), flow.Options{Observer: func(e flow.Event) {
		if e.Kind == flow.EventUpdate {
			updates = append(updates, string(e.Payload))
		}
	}})
	res, err := r.Invoke(context.Background(), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := typed.Decode(res.State)
	if err != nil || s.Count != 3 || strings.Join(s.Log, ",") != "saw 0,saw 1,saw 2" {
		t.Fatalf("%+v %v", s, err)
	}
	if len(updates) != 3 || updates[0] != `{"count":1,"log":"saw 0"}` {
		t.Fatalf("update events %v", updates)
	}
}

// A node whose nested commit lost a race (another process owns the thread
// now) must not leave a FAILED step behind: the step commits nothing.
func TestNodeConflictCommitsNothing(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			ctx := context.Background()
			s := inmem.Open(store.Options{})
			g := flow.NewGraph(schema)
			g.AddNode("nested", func(ctx context.Context, _ state.Doc) (state.Update, error) {
				return nil, fmt.Errorf("gate run: %w", store.ErrConflict)
			})
			g.AddEdge(flow.START, "nested")
			if parallel {
				g.AddNode("sibling", logNode("sibling"))
				g.AddEdge(flow.START, "sibling")
			}
			r := newRunner(t, g, s, flow.Options{})
			_, err := r.Invoke(ctx, "t", state.Update{"log": "in"})
			if !errors.Is(err, store.ErrConflict) {
				t.Fatalf("err = %v, want ErrConflict", err)
			}
			hist := history(t, s, "t")
			if len(hist) != 1 || hist[0].Status == store.StatusFailed {
				t.Fatalf("history = %d checkpoints (head status %v), want only the input", len(hist), hist[0].Status)
			}
			ws, err := s.Writes(ctx, "t", "", hist[0].Seq)
			if err != nil || len(ws) != 0 {
				t.Fatalf("pending writes = %v, %v; want none", ws, err)
			}
		})
	}
}

// Invoke with ExpectHead refuses to start on a head that moved since the
// caller looked, and writes nothing.
func TestInvokeExpectHead(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	r := oneNode(t, "a", s, flow.Options{})
	seen := int64(0)
	res, err := r.Invoke(ctx, "t", state.Update{"log": "one"}, flow.RunOptions{ExpectHead: &seen})
	if err != nil {
		t.Fatal(err)
	}
	stale := seen
	if _, err := r.Invoke(ctx, "t", state.Update{"log": "two"}, flow.RunOptions{ExpectHead: &stale}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale ExpectHead: err = %v, want ErrConflict", err)
	}
	if n := len(history(t, s, "t")); int64(n) != res.Head {
		t.Fatalf("history has %d checkpoints after a refused run, want %d", n, res.Head)
	}
	if _, err := r.Invoke(ctx, "t", state.Update{"log": "two"}, flow.RunOptions{ExpectHead: &res.Head}); err != nil {
		t.Fatalf("current ExpectHead: %v", err)
	}
}

// A run started inside a node names that node's task on its input
// checkpoint; a top-level run names none.
func TestNestedRunNamesParentTask(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	innerRunner := oneNode(t, "leaf", s, flow.Options{Namespace: "child"})
	var parentKey string
	outer := flow.NewGraph(schema)
	outer.AddNode("host", func(ctx context.Context, _ state.Doc) (state.Update, error) {
		info, _ := flow.Info(ctx)
		parentKey = info.Key
		_, err := innerRunner.Invoke(ctx, "t", state.Update{"log": "nested"})
		return state.Update{"log": "host"}, err
	})
	outer.AddEdge(flow.START, "host")
	if _, err := newRunner(t, outer, s, flow.Options{}).Invoke(ctx, "t", state.Update{"log": "in"}); err != nil {
		t.Fatal(err)
	}
	first := func(ns string) store.Checkpoint {
		cp, err := s.Load(ctx, store.LoadRequest{Thread: "t", Namespace: ns, Seq: 1})
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	if key, ok := flow.ParentTask(first("child")); !ok || key != parentKey || parentKey == "" {
		t.Fatalf("nested input names parent %q (%v), want %q", key, ok, parentKey)
	}
	if key, ok := flow.ParentTask(first("")); ok {
		t.Fatalf("top-level input names a parent task %q", key)
	}
}

// Resume on a thread without checkpoints says there is nothing to resume;
// on a finished run it returns at once and runs nothing.
func TestResumeNothing(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	r := oneNode(t, "a", s, flow.Options{})
	if _, err := r.Resume(ctx, "none", nil); !errors.Is(err, flow.ErrNothingToResume) || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("resume of an empty thread: %v", err)
	}
	done, err := r.Invoke(ctx, "t", state.Update{"log": "in"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Resume(ctx, "t", nil)
	if err != nil || res.Head != done.Head || res.StopReason != state.StopSuccess || len(history(t, s, "t")) != int(done.Head) {
		t.Fatalf("resume of a finished run: %+v, %v (finished at %d)", res, err, done.Head)
	}
}
