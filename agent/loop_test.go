package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// ResearchState is seed 002's example state.
type ResearchState struct {
	state.Base
	Scratchpad     []string `json:"scratchpad" cairn:"append"`
	SourcesVisited []string `json:"sources_visited" cairn:"append"`
	Confidence     float64  `json:"confidence"`
}

type readArgs struct {
	Source string `json:"source"`
}

func researcher(t *testing.T) *agent.LoopAgent[ResearchState] {
	typed, err := state.NewTyped[ResearchState]()
	if err != nil {
		t.Fatal(err)
	}
	read, err := agent.NewTool("read_source", "Read a source", func(ctx context.Context, tc agent.ToolContext, a readArgs) (any, error) {
		return "notes on " + a.Source, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sources := []string{"abstract", "methods", "conclusions", "appendix", "references"}
	return &agent.LoopAgent[ResearchState]{
		Name:  "researcher",
		Typed: typed,
		Tools: []agent.Tool{read},
		InitState: func(ctx context.Context, task agent.Task) (ResearchState, error) {
			return ResearchState{Base: state.NewBase(task.Objective, 10)}, nil
		},
		Decide: func(ctx context.Context, s ResearchState, obs string) (agent.Decision, error) {
			if s.Confidence >= 0.8 {
				return agent.Final("Summary of " + strings.Join(s.SourcesVisited, ", "))
			}
			args, _ := json.Marshal(readArgs{Source: sources[len(s.SourcesVisited)]})
			return agent.Act("need more sources", agent.Action{Name: "read_source", Args: args})
		},
		Reduce: func(ctx context.Context, s ResearchState, obs string, d agent.Decision, rs []agent.ActionResult) (state.Update, error) {
			if d.Mode != agent.ModeAct {
				return nil, nil
			}
			var note string
			if err := json.Unmarshal(rs[0].Output, &note); err != nil {
				return nil, err
			}
			var a readArgs
			_ = json.Unmarshal(d.Actions[0].Args, &a)
			return state.Update{"scratchpad": note, "sources_visited": a.Source, "confidence": s.Confidence + 0.3}, nil
		},
	}
}

func TestLoopAgentFinal(t *testing.T) {
	a := researcher(t)
	s := inmem.Open(store.Options{})
	res, err := a.Run(context.Background(), s, "research-001", agent.Task{ID: "research-001", Objective: "Summarize the findings in paper.pdf",
		SuccessCriteria: []string{"covers abstract, methods, conclusions"}}, flow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.StopReason != state.StopFinal || res.Steps != 4 || *res.FinalResult != "Summary of abstract, methods, conclusions" {
		t.Fatalf("result %+v", res)
	}
	if res.State.CurrentStep != 4 || len(res.State.Scratchpad) != 3 || res.State.Metadata["task_id"] != "research-001" {
		t.Fatalf("state %+v", res.State)
	}
}

func TestLoopAgentBudget(t *testing.T) {
	a := researcher(t)
	res, err := a.Run(context.Background(), inmem.Open(store.Options{}), "r2", agent.Task{ID: "r2", Objective: "x", Budget: agent.TaskBudget{MaxSteps: 2}}, flow.Options{Budget: flow.Budget{MaxSteps: 50}})
	if err != nil || res.Success || res.StopReason != state.StopBudgetSteps || res.Steps != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	// max_steps in the state stops the loop too.
	a.InitState = func(ctx context.Context, task agent.Task) (ResearchState, error) {
		return ResearchState{Base: state.NewBase(task.Objective, 1)}, nil
	}
	res, err = a.Run(context.Background(), inmem.Open(store.Options{}), "r3", agent.Task{ID: "r3", Objective: "x"}, flow.Options{})
	if err != nil || res.StopReason != state.StopMaxSteps || res.Steps != 1 {
		t.Fatalf("max steps: %+v %v", res, err)
	}
}

func TestLoopAgentPreflight(t *testing.T) {
	dir := t.TempDir()
	have := filepath.Join(dir, "corpus.txt")
	if err := os.WriteFile(have, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	task := agent.Task{ID: "p", Objective: "read", Resources: []agent.Resource{
		{Kind: "file", Path: have, Required: true},
		{Kind: "file", Path: filepath.Join(dir, "missing.pdf"), Required: true},
		{Kind: "dir", Path: have, Required: true},
		{Kind: "url", URI: "arxiv.org/abs/1"},
		{Kind: "tape", Path: "x"},
		{Kind: "dir", Path: filepath.Join(dir, "optional"), Required: false},
	}}
	codes := []string{}
	for _, is := range task.Preflight() {
		codes = append(codes, is.Code)
	}
	if strings.Join(codes, ",") != "TASK_RESOURCE_MISSING,TASK_RESOURCE_NOT_DIR,TASK_RESOURCE_URL_INVALID,TASK_RESOURCE_KIND_INVALID" {
		t.Fatalf("codes %v", codes)
	}
	a := researcher(t)
	called := false
	a.Decide = func(context.Context, ResearchState, string) (agent.Decision, error) {
		called = true
		return agent.Final("x")
	}
	res, err := a.Run(context.Background(), inmem.Open(store.Options{}), "p", task, flow.Options{})
	if err != nil || res.StopReason != state.StopTaskValidationFailed || res.Steps != 0 || called || len(res.Issues) != 4 || res.Success {
		t.Fatalf("preflight run %+v %v", res, err)
	}
}

func TestDecisions(t *testing.T) {
	if _, err := agent.Act("no actions"); !errors.Is(err, agent.ErrInvalidDecision) {
		t.Fatal(err)
	}
	if _, err := agent.Final(""); !errors.Is(err, agent.ErrInvalidDecision) {
		t.Fatal(err)
	}
	if _, err := agent.Branch("none"); !errors.Is(err, agent.ErrInvalidDecision) {
		t.Fatal(err)
	}
	if _, err := agent.Handoff("", "why"); !errors.Is(err, agent.ErrInvalidDecision) {
		t.Fatal(err)
	}
	if err := (agent.Decision{Mode: "dance"}).Validate(); !errors.Is(err, agent.ErrInvalidDecision) {
		t.Fatal(err)
	}
	f, _ := agent.Final("a")
	if _, err := agent.Branch("two ways", f, agent.Decision{Mode: agent.ModeAct}); !errors.Is(err, agent.ErrInvalidDecision) {
		t.Fatalf("bad candidate: %v", err)
	}
}

func TestActionsTimeoutsAndWait(t *testing.T) {
	a := researcher(t)
	slow := agent.Tool{Name: "slow", Handler: func(ctx context.Context, tc agent.ToolContext, _ json.RawMessage) (any, error) {
		select {
		case <-time.After(time.Second):
			return "late", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	a.Tools = append(a.Tools, slow)
	step := 0
	a.Decide = func(ctx context.Context, s ResearchState, obs string) (agent.Decision, error) {
		step++
		switch step {
		case 1:
			return agent.Act("try", agent.Action{Name: "slow", Timeout: 5 * time.Millisecond, MaxRetries: 2}, agent.Action{Name: "nope"})
		case 2:
			return agent.Wait("approval of the plan")
		default:
			return agent.Final("approved: " + s.Scratchpad[len(s.Scratchpad)-1])
		}
	}
	var got []agent.ActionResult
	a.Reduce = func(ctx context.Context, s ResearchState, obs string, d agent.Decision, rs []agent.ActionResult) (state.Update, error) {
		got = rs
		if d.Mode == agent.ModeWait {
			return state.Update{"scratchpad": string(rs[0].Output)}, nil
		}
		return nil, nil
	}
	st := inmem.Open(store.Options{})
	task := agent.Task{ID: "w", Objective: "plan"}
	res, err := a.Run(context.Background(), st, "w", task, flow.Options{})
	if err != nil || res.StopReason != state.StopInterrupt {
		t.Fatalf("wait: %+v %v", res, err)
	}
	// The first step's actions: timed out after 3 attempts, and skipped.
	for cp, err := range st.History(context.Background(), store.HistoryRequest{Thread: "w", WithState: true}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.Seq == 2 {
			var meta struct {
				LastActions []agent.ActionResult `json:"last_actions"`
			}
			if err := cp.State.Get("metadata", &meta); err != nil {
				t.Fatal(err)
			}
			if len(meta.LastActions) != 2 || meta.LastActions[0].Status != agent.ActionTimedOut || meta.LastActions[0].Attempts != 3 || meta.LastActions[1].Status != agent.ActionSkipped {
				t.Fatalf("actions %+v", meta.LastActions)
			}
		}
	}
	step = 1 // the wait step runs again on resume
	res, err = a.Resume(context.Background(), st, "w", task, "yes", flow.Options{})
	if err != nil || !res.Success || *res.FinalResult != `approved: "yes"` {
		t.Fatalf("resume: %+v %v (%v)", res, err, got)
	}
}
