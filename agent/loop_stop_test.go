package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/tracefile"
)

var researchTask = agent.Task{ID: "r", Objective: "Summarize the findings in paper.pdf"}

// ShouldStop applies after a resume exactly as in the first run.
func TestLoopAgentResumeKeepsShouldStop(t *testing.T) {
	a := researcher(t)
	decide := a.Decide
	decides := 0
	a.Decide = func(ctx context.Context, s ResearchState, obs string) (agent.Decision, error) {
		decides++
		if s.CurrentStep == 1 {
			return agent.Wait("go on?")
		}
		return decide(ctx, s, obs)
	}
	a.ShouldStop = func(s ResearchState) (state.StopReason, bool) {
		return state.StopAgentCondition, s.CurrentStep >= 2
	}
	st := inmem.Open(store.Options{})
	res, err := a.Run(context.Background(), st, "r", researchTask, flow.Options{})
	if err != nil || res.StopReason != state.StopInterrupt {
		t.Fatalf("run: %+v %v", res, err)
	}
	res, err = a.Resume(context.Background(), st, "r", researchTask, "yes", flow.Options{})
	if err != nil || res.StopReason != state.StopAgentCondition || res.State.CurrentStep != 2 || decides != 3 {
		t.Fatalf("resume: stop %s at step %d after %d decisions (%v)", res.StopReason, res.State.CurrentStep, decides, err)
	}
}

// noChange makes every step act without changing the state.
func noChange(a *agent.LoopAgent[ResearchState]) {
	a.Reduce = func(context.Context, ResearchState, string, agent.Decision, []agent.ActionResult) (state.Update, error) {
		return nil, nil
	}
}

func TestLoopAgentStopRules(t *testing.T) {
	score := 0.9
	tests := []struct {
		name        string
		setup       func(a *agent.LoopAgent[ResearchState])
		want        state.StopReason
		wantSteps   int
		wantSuccess bool
	}{
		{"stagnation", func(a *agent.LoopAgent[ResearchState]) { noChange(a); a.Stagnation = 3 }, state.StopStagnation, 3, false},
		{"progress is not stagnation", func(a *agent.LoopAgent[ResearchState]) { a.Stagnation = 1 }, state.StopFinal, 4, true},
		{"custom signature", func(a *agent.LoopAgent[ResearchState]) {
			a.Stagnation = 2
			a.Signature = func(s ResearchState) any { return len(s.Scratchpad) > 2 }
		}, state.StopStagnation, 2, false},
		{"critic stop", func(a *agent.LoopAgent[ResearchState]) {
			a.Critics = []agent.Critic[ResearchState]{
				func(ctx context.Context, s ResearchState, d agent.Decision, rs []agent.ActionResult) (agent.CriticOutput, error) {
					return agent.CriticOutput{}, nil
				},
				func(ctx context.Context, s ResearchState, d agent.Decision, rs []agent.ActionResult) (agent.CriticOutput, error) {
					if s.Confidence >= 0.6 { // the state after this step's reduce
						return agent.CriticOutput{Action: agent.CriticStop, Reason: "enough", Score: &score}, nil
					}
					return agent.CriticOutput{Action: agent.CriticContinue}, nil
				},
			}
		}, state.StopCriticStop, 2, false},
		{"critic retry skips stop checks", func(a *agent.LoopAgent[ResearchState]) {
			noChange(a)
			a.Stagnation = 1
			a.Critics = []agent.Critic[ResearchState]{func(ctx context.Context, s ResearchState, d agent.Decision, rs []agent.ActionResult) (agent.CriticOutput, error) {
				return agent.CriticOutput{Action: agent.CriticRetry}, nil
			}}
		}, state.StopMaxSteps, 10, false},
		{"critic retry rejects a final answer", func(a *agent.LoopAgent[ResearchState]) {
			rejected := false
			a.Critics = []agent.Critic[ResearchState]{func(ctx context.Context, s ResearchState, d agent.Decision, rs []agent.ActionResult) (agent.CriticOutput, error) {
				if d.Mode == agent.ModeFinal && !rejected {
					rejected = true
					return agent.CriticOutput{Action: agent.CriticRetry, Reason: "cite sources"}, nil
				}
				return agent.CriticOutput{}, nil
			}}
		}, state.StopFinal, 5, true},
		{"env terminal", func(a *agent.LoopAgent[ResearchState]) {
			a.EnvTerminal = func(ctx context.Context, s ResearchState, rs []agent.ActionResult) bool {
				return len(s.SourcesVisited) == 2 && len(rs) == 1
			}
		}, state.StopEnvTerminal, 2, true},
		{"context overflow", func(a *agent.LoopAgent[ResearchState]) {
			decide := a.Decide
			a.Decide = func(ctx context.Context, s ResearchState, obs string) (agent.Decision, error) {
				if s.CurrentStep == 1 {
					return agent.Decision{}, fmt.Errorf("model: %w", &agent.ProviderError{Provider: "openai", Status: 400, Err: agent.ErrContextOverflow})
				}
				return decide(ctx, s, obs)
			}
		}, state.StopContextOverflow, 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := researcher(t)
			tc.setup(a)
			res, err := a.Run(context.Background(), inmem.Open(store.Options{}), "r", researchTask, flow.Options{})
			if err != nil || res.StopReason != tc.want || res.Steps != tc.wantSteps || res.Success != tc.wantSuccess {
				t.Fatalf("stop %s after %d steps, success %v (%v); want %s after %d, success %v", res.StopReason, res.Steps, res.Success, err, tc.want, tc.wantSteps, tc.wantSuccess)
			}
		})
	}
}

// Metadata that Reduce returns is merged with the loop's own.
func TestLoopAgentReduceMetadata(t *testing.T) {
	a := researcher(t)
	reduce := a.Reduce
	a.Reduce = func(ctx context.Context, s ResearchState, obs string, d agent.Decision, rs []agent.ActionResult) (state.Update, error) {
		u, err := reduce(ctx, s, obs, d, rs)
		if u == nil {
			u = state.Update{}
		}
		u["metadata"] = map[string]any{"phase": fmt.Sprint("step ", s.CurrentStep)}
		return u, err
	}
	res, err := a.Run(context.Background(), inmem.Open(store.Options{}), "r", researchTask, flow.Options{})
	if err != nil || res.State.Metadata["phase"] != "step 3" || res.State.Metadata["last_decision"] == nil || res.State.Metadata["task_id"] != "r" {
		t.Fatalf("metadata %v (%v)", res.State.Metadata, err)
	}
}

// The stagnation count lives in the state, so a resume continues it.
func TestLoopAgentStagnationAcrossResume(t *testing.T) {
	a := researcher(t)
	noChange(a)
	a.Stagnation = 3
	a.Decide = func(ctx context.Context, s ResearchState, obs string) (agent.Decision, error) {
		if s.CurrentStep == 1 {
			return agent.Wait("go on?")
		}
		return agent.Act("look", agent.Action{Name: "read_source", Args: json.RawMessage(`{"source":"x"}`)})
	}
	a.Reduce = func(ctx context.Context, s ResearchState, obs string, d agent.Decision, rs []agent.ActionResult) (state.Update, error) {
		return nil, nil
	}
	st := inmem.Open(store.Options{})
	if res, err := a.Run(context.Background(), st, "r", researchTask, flow.Options{}); err != nil || res.StopReason != state.StopInterrupt {
		t.Fatalf("run: %+v %v", res, err)
	}
	res, err := a.Resume(context.Background(), st, "r", researchTask, "yes", flow.Options{})
	if err != nil || res.StopReason != state.StopStagnation || res.State.CurrentStep != 3 || fmt.Sprint(res.State.Metadata["stagnant_steps"]) != "3" {
		t.Fatalf("resume: stop %s at step %d, metadata %v (%v)", res.StopReason, res.State.CurrentStep, res.State.Metadata, err)
	}
}

func TestLoopAgentPreflightCodes(t *testing.T) {
	tests := []struct {
		name  string
		task  agent.Task
		codes string
	}{
		{"id and objective", agent.Task{Objective: " "}, "TASK_ID_INVALID,TASK_OBJECTIVE_INVALID"},
		{"budget", agent.Task{ID: "b", Objective: "o", Budget: agent.TaskBudget{MaxSteps: -1, MaxRuntimeSeconds: -2, MaxTokens: -3}},
			"TASK_BUDGET_STEPS_INVALID,TASK_BUDGET_RUNTIME_INVALID,TASK_BUDGET_TOKENS_INVALID"},
		{"env spec", agent.Task{ID: "e", Objective: "o", Env: &agent.EnvSpec{}}, "TASK_ENV_SPEC_INVALID"},
		{"resource locator", agent.Task{ID: "r", Objective: "o", Resources: []agent.Resource{{Kind: "file", Required: true}}}, "TASK_RESOURCE_LOCATOR_MISSING"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var codes []string
			for _, is := range tc.task.Preflight() {
				if is.Field == "" || is.Message == "" {
					t.Errorf("issue without field or message: %+v", is)
				}
				codes = append(codes, is.Code)
			}
			if strings.Join(codes, ",") != tc.codes {
				t.Fatalf("codes %v, want %s", codes, tc.codes)
			}
			res, err := researcher(t).Run(context.Background(), inmem.Open(store.Options{}), "p", tc.task, flow.Options{})
			if err != nil || res.StopReason != state.StopTaskValidationFailed || res.Success || res.Steps != 0 ||
				res.FinalResult == nil || *res.FinalResult != agent.PreflightFailed || res.State.FinalResult == nil {
				t.Fatalf("run: %+v %v", res, err)
			}
		})
	}
}

// A loop agent's steps carry QitOS's step record into the trace.
func TestLoopAgentTraceRows(t *testing.T) {
	a := researcher(t)
	a.Prepare = func(ctx context.Context, s ResearchState) (string, error) {
		return fmt.Sprintf("visited %d", len(s.SourcesVisited)), nil
	}
	a.Critics = []agent.Critic[ResearchState]{func(ctx context.Context, s ResearchState, d agent.Decision, rs []agent.ActionResult) (agent.CriticOutput, error) {
		return agent.CriticOutput{Action: agent.CriticContinue, Reason: "fine"}, nil
	}}
	st := inmem.Open(store.Options{})
	if _, err := a.Run(context.Background(), st, "r", researchTask, flow.Options{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := tracefile.Export(context.Background(), st, "r", dir); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []map[string]json.RawMessage
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var row map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	if len(rows) != 5 { // input, three reads, final
		t.Fatalf("%d rows", len(rows))
	}
	for _, row := range rows {
		for _, k := range []string{"step_id", "observation", "decision", "actions", "action_results", "tool_invocations", "critic_outputs", "state_diff"} {
			if _, ok := row[k]; !ok {
				t.Fatalf("row %s lacks %s", row["step_id"], k)
			}
		}
	}
	want := map[string]string{
		"observation":    `"visited 1"`,
		"actions":        `[{"name":"read_source","args":{"source":"methods"}}]`,
		"action_results": `["notes on methods"]`,
		"critic_outputs": `[{"action":"continue","reason":"fine"}]`,
		"decision":       `{"mode":"act","actions":[{"name":"read_source","args":{"source":"methods"}}],"rationale":"need more sources"}`,
	}
	for k, v := range want {
		if !sameJSON(t, rows[2][k], v) {
			t.Errorf("step 2 %s = %s, want %s", k, rows[2][k], v)
		}
	}
	var inv []map[string]any
	if err := json.Unmarshal(rows[2]["tool_invocations"], &inv); err != nil || len(inv) != 1 || inv[0]["tool_name"] != "read_source" ||
		inv[0]["status"] != "success" || inv[0]["attempts"] != float64(1) || inv[0]["error"] != nil {
		t.Errorf("tool invocations %s", rows[2]["tool_invocations"])
	}
	if string(rows[4]["decision"]) == "null" || string(rows[0]["decision"]) != "null" || string(rows[0]["actions"]) != "[]" {
		t.Errorf("final row decision %s, input row %s %s", rows[4]["decision"], rows[0]["decision"], rows[0]["actions"])
	}
}

func sameJSON(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(g, w)
}
