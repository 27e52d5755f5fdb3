package flow_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/flow/baserules"
	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// loopGraph runs node "n" forever; fn runs inside it before it counts.
func loopGraph(t testing.TB, fn func(ctx context.Context, n int) error) *flow.Compiled {
	t.Helper()
	c, err := buildLoop(fn)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func buildLoop(fn func(ctx context.Context, n int) error) (*flow.Compiled, error) {
	return flow.NewGraph(schema).
		AddNode("n", func(ctx context.Context, d state.Doc) (state.Update, error) {
			var n int
			_ = d.Get("count", &n)
			if fn != nil {
				if err := fn(ctx, n); err != nil {
					return nil, err
				}
			}
			return state.Update{"count": 1}, nil
		}).
		AddEdge(flow.START, "n").AddEdge("n", "n").
		Compile()
}

func countOf(t *testing.T, d state.Doc) int {
	t.Helper()
	var n int
	if err := d.Get("count", &n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRecursionLimit(t *testing.T) {
	tests := []struct {
		name      string
		opts      flow.Options
		ro        flow.RunOptions
		wantSteps int
		want      state.StopReason
	}{
		{"default is 25", flow.Options{}, flow.RunOptions{}, flow.DefaultRecursionLimit, state.StopRecursionLimit},
		{"raised on the runner", flow.Options{RecursionLimit: 40}, flow.RunOptions{}, 40, state.StopRecursionLimit},
		{"raised for one run", flow.Options{}, flow.RunOptions{RecursionLimit: 30}, 30, state.StopRecursionLimit},
		{"budget first", flow.Options{Budget: flow.Budget{MaxSteps: 10}}, flow.RunOptions{}, 10, state.StopBudgetSteps},
		{"negative is none", flow.Options{RecursionLimit: -1, Budget: flow.Budget{MaxSteps: 60}}, flow.RunOptions{}, 60, state.StopBudgetSteps},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := inmem.Open(store.Options{})
			r, err := flow.NewRunner(loopGraph(t, nil), s, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Invoke(context.Background(), "t", nil, tc.ro)
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != tc.want || res.Progress.Steps != tc.wantSteps || countOf(t, res.State) != tc.wantSteps {
				t.Fatalf("stop %s after %d steps (count %d), want %s after %d", res.StopReason, res.Progress.Steps, countOf(t, res.State), tc.want, tc.wantSteps)
			}
		})
	}
	// The graph's own limit applies when the options set none.
	g := flow.NewGraph(schema).AddNode("n", logNode("n")).AddEdge(flow.START, "n").AddEdge("n", "n").WithRecursionLimit(7)
	for _, tc := range []struct{ opts, want int }{{0, 7}, {3, 3}} {
		res, err := newRunner(t, g, inmem.Open(store.Options{}), flow.Options{RecursionLimit: tc.opts}).Invoke(context.Background(), "t", nil)
		if err != nil || res.StopReason != state.StopRecursionLimit || res.Progress.Steps != tc.want {
			t.Fatalf("graph limit: %v %s %d steps, want %d", err, res.StopReason, res.Progress.Steps, tc.want)
		}
	}
	// A new Invoke is a new run with its own limit.
	s := inmem.Open(store.Options{})
	r, _ := flow.NewRunner(loopGraph(t, nil), s, flow.Options{RecursionLimit: 5})
	for turn := 1; turn <= 2; turn++ {
		res, err := r.Invoke(context.Background(), "t", nil)
		if err != nil || res.StopReason != state.StopRecursionLimit || countOf(t, res.State) != 5*turn {
			t.Fatalf("turn %d: %v %s count %d", turn, err, res.StopReason, countOf(t, res.State))
		}
	}
}

// Steps, tokens and failed steps count across resumes: a run whose node
// fails every third call and is resumed each time still stops at its
// budget, and every checkpoint records the cumulative usage.
func TestBudgetAcrossFailedResumes(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	calls := 0
	r, err := flow.NewRunner(loopGraph(t, func(ctx context.Context, n int) error {
		calls++
		flow.AddTokens(ctx, 7, 3)
		if calls%3 == 0 {
			return errors.New("flaky")
		}
		return nil
	}), s, flow.Options{Budget: flow.Budget{MaxTokens: 200}, RecursionLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Invoke(ctx, "t", nil)
	for attempts := 0; err != nil; attempts++ {
		if attempts > 100 {
			t.Fatal("the budget never stopped the run")
		}
		res, err = r.Resume(ctx, "t", nil)
	}
	// 20 steps of 10 tokens each, a third of them failed.
	if res.StopReason != state.StopBudgetTokens || calls != 20 || res.Progress.Tokens.Input+res.Progress.Tokens.Output != 200 {
		t.Fatalf("stop %s after %d calls, progress %+v", res.StopReason, calls, res.Progress)
	}
	head, err := s.Load(ctx, store.LoadRequest{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if u := head.Meta.Usage; u == nil || u.Steps != 20 || u.Tokens != (store.Tokens{Input: 140, Output: 60}) {
		t.Fatalf("head usage %+v", u)
	}
	// Resuming a run stopped by its budget stops again at once.
	res, err = r.Resume(ctx, "t", nil)
	if err != nil || res.StopReason != state.StopBudgetTokens || calls != 20 {
		t.Fatalf("resume after the budget: %v %s, %d calls", err, res.StopReason, calls)
	}
	// Raising it continues the same run.
	res, err = r.Resume(ctx, "t", nil, flow.RunOptions{Budget: flow.Budget{MaxTokens: 250}})
	for err != nil {
		res, err = r.Resume(ctx, "t", nil, flow.RunOptions{Budget: flow.Budget{MaxTokens: 250}})
	}
	if res.StopReason != state.StopBudgetTokens || calls != 25 {
		t.Fatalf("raised budget: %s, %d calls", res.StopReason, calls)
	}
}

// A fork inherits the usage counters of its checkpoint and starts a new
// run; a resume after an interrupt starts a new run too.
func TestForkAndInterruptStartRuns(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	r, _ := flow.NewRunner(loopGraph(t, nil), s, flow.Options{RecursionLimit: 6, InterruptAfter: []string{"n"}})
	res, err := r.Invoke(ctx, "t", nil)
	for i := 0; i < 9 && err == nil && res.StopReason == state.StopInterrupt; i++ {
		res, err = r.Resume(ctx, "t", nil)
	}
	if err != nil || res.StopReason != state.StopInterrupt || countOf(t, res.State) != 10 {
		t.Fatalf("interrupted run: %v %s count %d (each resume after an interrupt is a new run)", err, res.StopReason, countOf(t, res.State))
	}
	r2, _ := flow.NewRunner(loopGraph(t, nil), s, flow.Options{RecursionLimit: 6})
	res, err = r2.RunFrom(ctx, "t", 4, nil)
	if err != nil || res.StopReason != state.StopRecursionLimit || res.Progress.Steps != 6 {
		t.Fatalf("fork: %v %s %+v", err, res.StopReason, res.Progress)
	}
	var fork store.Checkpoint
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: "t"}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.Meta.Source == "fork" {
			fork = cp
			break
		}
	}
	src, _ := s.Load(ctx, store.LoadRequest{Thread: "t", Seq: 4})
	if fork.Meta.Usage == nil || src.Meta.Usage == nil || fork.Meta.Usage.Steps != src.Meta.Usage.Steps || src.Meta.Usage.Steps != 3 {
		t.Fatalf("fork usage %+v, source usage %+v", fork.Meta.Usage, src.Meta.Usage)
	}
	head, _ := s.Load(ctx, store.LoadRequest{Thread: "t"})
	if head.Meta.Usage.Steps != src.Meta.Usage.Steps+6 {
		t.Fatalf("branch head usage %+v", head.Meta.Usage)
	}
}

// budgetChild runs or resumes thread "b" with a budget of budgetSteps,
// killing its own process with SIGKILL in the 5th step it runs (mode
// "every5") or whenever the count reaches 2 (mode "always": that step
// never commits).
func budgetChild(dbPath, mode string) error {
	s, err := sqlite.OpenStore(context.Background(), dbPath, sqlite.Options{}, store.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	ran := 0
	g, err := buildLoop(func(ctx context.Context, n int) error {
		if ran++; (mode == "every5" && ran == 5) || (mode == "always" && n == 2) {
			return syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return nil
	})
	if err != nil {
		return err
	}
	r, err := flow.NewRunner(g, s, flow.Options{Budget: flow.Budget{MaxSteps: budgetSteps}, RecursionLimit: -1})
	if err != nil {
		return err
	}
	ctx := context.Background()
	var res flow.Result
	if _, terr := s.Thread(ctx, "b"); errors.Is(terr, store.ErrNotFound) {
		res, err = r.Invoke(ctx, "b", nil)
	} else {
		res, err = r.Resume(ctx, "b", nil)
	}
	if err != nil {
		return err
	}
	fmt.Println("stop:", res.StopReason)
	return nil
}

const budgetSteps = 30

// TestBudgetSurvivesKill: a process that is killed (SIGKILL) every fifth
// step and resumed each time stops at its step budget in total; so does
// one killed in the same step every time (each crashed attempt counts).
func TestBudgetSurvivesKill(t *testing.T) {
	crashtest.RunChild("CAIRN_BUDGET_CHILD", func() error {
		return budgetChild(os.Getenv("CAIRN_BUDGET_CHILD"), os.Getenv("CAIRN_BUDGET_MODE"))
	})
	if testing.Short() {
		t.Skip("spawns processes")
	}
	tests := []struct {
		mode      string
		wantCount int
		wantKills int
		wantUsage int64 // steps in the head's usage
	}{
		{"every5", budgetSteps, budgetSteps / 4, budgetSteps},
		// Two steps commit; the Invoke and 28 resumes crash in the third.
		// The checkpoint that records the stop counts all 30.
		{"always", 2, budgetSteps - 1, budgetSteps},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "b.db")
			kills := 0
			for {
				cmd := crashtest.Command("TestBudgetSurvivesKill", "CAIRN_BUDGET_CHILD="+db, "CAIRN_BUDGET_MODE="+tc.mode)
				cmd.Stderr = nil // Output collects it
				out, err := cmd.Output()
				if crashtest.Killed(err) {
					if kills++; kills > 2*budgetSteps {
						t.Fatalf("still running after %d kills: the budget restarts on every resume", kills)
					}
					continue
				}
				if err != nil {
					t.Fatalf("child: %v %s", err, out)
				}
				if !strings.Contains(string(out), "stop: budget_steps") {
					t.Fatalf("child ended with %s", out)
				}
				break
			}
			s, err := sqlite.OpenStore(context.Background(), db, sqlite.Options{}, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			head, err := s.Load(context.Background(), store.LoadRequest{Thread: "b"})
			if err != nil {
				t.Fatal(err)
			}
			if n := countOf(t, head.State); n != tc.wantCount || kills != tc.wantKills || head.Meta.Usage.Steps != tc.wantUsage ||
				head.Status != store.StatusPartial || head.Meta.StopReason != string(state.StopBudgetSteps) {
				t.Fatalf("count %d after %d kills, head %s %q usage %+v; want %d after %d, PARTIAL budget_steps, %d steps",
					n, kills, head.Status, head.Meta.StopReason, head.Meta.Usage, tc.wantCount, tc.wantKills, tc.wantUsage)
			}
		})
	}
}

// Idempotency keys name the namespace: the same node of two namespaces of
// one thread (the gates of a pipeline) gets different keys.
func TestKeysNameTheNamespace(t *testing.T) {
	s := inmem.Open(store.Options{})
	var keys []string
	g := flow.NewGraph(schema).AddNode("output", func(ctx context.Context, _ state.Doc) (state.Update, error) {
		info, _ := flow.Info(ctx)
		keys = append(keys, info.Key)
		return state.Update{"messages": state.Message{Role: "ai", Content: "x"}}, nil
	}).Chain("output")
	for _, ns := range []string{"", "gate1", "gate2", "gate2/sub:1"} {
		r := newRunner(t, g, s, flow.Options{Namespace: ns})
		res, err := r.Invoke(context.Background(), "t", nil)
		if err != nil {
			t.Fatal(err)
		}
		var msgs []state.Message
		if err := res.State.Get("messages", &msgs); err != nil || !strings.HasPrefix(msgs[0].ID, keys[len(keys)-1]+"/") {
			t.Fatalf("%s: message ids %v (%v) do not follow the key %s", ns, msgs, err, keys[len(keys)-1])
		}
	}
	want := []string{"t/1/output", "t/gate1/1/output", "t/gate2/1/output", "t/gate2/sub:1/1/output"}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Fatalf("keys %v, want %v", keys, want)
	}
}

// A subgraph that reaches its step limit fails the parent's node with
// ErrRecursionLimit; SubgraphOptions.RecursionLimit raises it.
func TestSubgraphRecursionLimit(t *testing.T) {
	child := loopGraph(t, nil)
	for _, tc := range []struct {
		limit int
		want  error
	}{{0, flow.ErrRecursionLimit}, {-1, nil}} {
		opts := flow.SubgraphOptions{RecursionLimit: tc.limit, Budget: flow.Budget{MaxSteps: 40}}
		g := flow.NewGraph(schema).AddNode("sub", flow.Subgraph(child, opts)).Chain("sub")
		_, err := newRunner(t, g, inmem.Open(store.Options{}), flow.Options{}).Invoke(context.Background(), "t", nil)
		if !errors.Is(err, tc.want) {
			t.Fatalf("limit %d: %v, want %v", tc.limit, err, tc.want)
		}
	}
}

// What runs after UpdateState is a new run with its own budget.
func TestUpdateStateStartsARun(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	r, _ := flow.NewRunner(loopGraph(t, nil), s, flow.Options{RecursionLimit: 4})
	if res, err := r.Invoke(ctx, "t", nil); err != nil || res.StopReason != state.StopRecursionLimit {
		t.Fatalf("%v %s", err, res.StopReason)
	}
	if res, err := r.Resume(ctx, "t", nil); err != nil || res.StopReason != state.StopRecursionLimit || countOf(t, res.State) != 4 {
		t.Fatalf("resume after the limit ran on: %v %s %d", err, res.StopReason, countOf(t, res.State))
	}
	if _, err := r.UpdateState(ctx, "t", state.Update{"log": "edited"}, "n"); err != nil {
		t.Fatal(err)
	}
	res, err := r.Resume(ctx, "t", nil)
	if err != nil || res.StopReason != state.StopRecursionLimit || countOf(t, res.State) != 8 || res.Progress.Steps != 4 {
		t.Fatalf("after UpdateState: %v %s count %d %+v", err, res.StopReason, countOf(t, res.State), res.Progress)
	}
}

// A max_steps in the state (with the rules of state.Base) bounds a run: the default step limit
// yields to it; an explicit limit does not.
func TestMaxStepsOverDefaultLimit(t *testing.T) {
	in := state.Update{"max_steps": 40, "current_step": 0}
	for _, tc := range []struct {
		limit int
		want  state.StopReason
		steps int
	}{{0, state.StopMaxSteps, 40}, {30, state.StopRecursionLimit, 30}} {
		r, _ := flow.NewRunner(loopGraph(t, nil), inmem.Open(store.Options{}), flow.Options{RecursionLimit: tc.limit, Rules: []flow.Rules{baserules.Rules()}})
		res, err := r.Invoke(context.Background(), "t", in)
		if err != nil || res.StopReason != tc.want || res.Progress.Steps != tc.steps {
			t.Fatalf("limit %d: %v %s after %d steps", tc.limit, err, res.StopReason, res.Progress.Steps)
		}
	}
}
