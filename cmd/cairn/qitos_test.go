package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// tallyState is a QitOS state that counts its steps' notes.
type tallyState struct {
	state.Base
	Notes []string `json:"notes" cairn:"append"`
}

// tallyAgent is a loop agent that takes notes for ever: only a budget
// stops it. Each decision uses 10 tokens and takes pause.
func tallyAgent(t *testing.T, maxSteps int, pause time.Duration) *agent.LoopAgent[tallyState] {
	t.Helper()
	typed, err := state.NewTyped[tallyState]()
	if err != nil {
		t.Fatal(err)
	}
	note, err := agent.NewTool("note", "Take a note", func(ctx context.Context, tc agent.ToolContext, _ struct{}) (any, error) {
		return "noted", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &agent.LoopAgent[tallyState]{
		Name: "tally", Typed: typed, Tools: []agent.Tool{note},
		InitState: func(ctx context.Context, task agent.Task) (tallyState, error) {
			return tallyState{Base: state.NewBase(task.Objective, maxSteps)}, nil
		},
		Decide: func(ctx context.Context, s tallyState, obs string) (agent.Decision, error) {
			flow.AddTokens(ctx, 7, 3)
			time.Sleep(pause)
			return agent.Act("one more", agent.Action{Name: "note"})
		},
		Reduce: func(ctx context.Context, s tallyState, obs string, d agent.Decision, rs []agent.ActionResult) (state.Update, error) {
			return state.Update{"notes": "n"}, nil
		},
	}
}

// TestQitOSBudgetStopsOnRecord: a QitOS run stopped by each kind of
// budget shows the stop where a CLI user looks: cairn state (the state's
// stop_reason), cairn history (a PARTIAL checkpoint naming it) and cairn
// export --format trace (manifest status "stopped" and its stop_reason),
// with the task's id and metadata in the manifest; its final_result
// stays null (QitOS sets none on a budget).
func TestQitOSBudgetStopsOnRecord(t *testing.T) {
	tests := []struct {
		kind     state.StopReason
		maxSteps int
		pause    time.Duration
		budget   agent.TaskBudget
	}{
		{state.StopBudgetSteps, 50, 0, agent.TaskBudget{MaxSteps: 2}},
		{state.StopBudgetTime, 50, 20 * time.Millisecond, agent.TaskBudget{MaxRuntimeSeconds: 0.05}},
		{state.StopBudgetTokens, 50, 0, agent.TaskBudget{MaxTokens: 25}},
		{state.StopMaxSteps, 3, 0, agent.TaskBudget{}},
	}
	for _, tc := range tests {
		t.Run(string(tc.kind), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			db := filepath.Join(dir, "q.db")
			s, err := sqlite.OpenStore(context.Background(), db, sqlite.Options{}, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			meta := map[string]any{"benchmark": "papers", "split": "dev"}
			task := agent.Task{ID: "research-001", Objective: "take notes", Budget: tc.budget, Metadata: meta}
			res, err := tallyAgent(t, tc.maxSteps, tc.pause).Run(ctx, s, "q", task, flow.Options{})
			if cerr := s.Close(); err == nil {
				err = cerr
			}
			if err != nil || res.StopReason != tc.kind {
				t.Fatalf("run: %s (%v), want %s", res.StopReason, err, tc.kind)
			}
			env := map[string]string{"CAIRN_STORE": "sqlite:" + db}
			cliWants(t, env, []string{"state", "q"}, `"stop_reason": "`+string(tc.kind)+`"`, `"final_result": null`)
			cliWants(t, env, []string{"history", "q", "--limit", "1"}, "PARTIAL", "stopped: "+string(tc.kind))
			tr := filepath.Join(dir, "trace")
			cliWants(t, env, []string{"export", "q", "--format", "trace", "--dir", tr}, "status stopped, stop reason "+string(tc.kind))
			b, err := os.ReadFile(filepath.Join(tr, "manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				Status   string         `json:"status"`
				TaskID   string         `json:"task_id"`
				Metadata map[string]any `json:"metadata"`
				Summary  struct {
					StopReason  string          `json:"stop_reason"`
					FinalResult json.RawMessage `json:"final_result"`
				} `json:"summary"`
			}
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if m.Status != "stopped" || m.Summary.StopReason != string(tc.kind) || string(m.Summary.FinalResult) != "null" ||
				m.TaskID != "research-001" || !reflect.DeepEqual(m.Metadata, meta) {
				t.Fatalf("manifest.json:\n%s", b)
			}
		})
	}
}

// cliWants runs the CLI and checks that it succeeds with each of want in
// its output.
func cliWants(t *testing.T, env map[string]string, args []string, want ...string) {
	t.Helper()
	code, out, errOut := cli(t, env, args...)
	if code != 0 {
		t.Fatalf("cairn %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("cairn %s: output lacks %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
}
