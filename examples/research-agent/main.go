// Command research-agent is seed 002's QitOS-style agent on Cairn: typed
// state with the built-in fields, a Task whose resources are checked before
// the loop, a decide/act/reduce loop whose every iteration is a committed
// step, and two runs — one that ends with a final result, one stopped by
// its step budget.
//
//	go run ./examples/research-agent
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	_ "github.com/cairn-dev/cairn/store/inmem"
	_ "github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// ResearchState is seed 002's state.
type ResearchState struct {
	state.Base
	Scratchpad     []string `json:"scratchpad" cairn:"append"`
	SourcesVisited []string `json:"sources_visited" cairn:"append"`
	Confidence     float64  `json:"confidence"`
}

type readArgs struct {
	Source string `json:"source"`
}

// decisionSchema is what the model's decisions must look like.
const decisionSchema = `{"type":"object","required":["mode"],"properties":{
  "mode":{"enum":["act","final","wait","branch","handoff"]},
  "rationale":{"type":"string"},
  "final_answer":{"type":"string"},
  "actions":{"type":"array","items":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"args":{"type":"object"}}}}}}`

// researcher builds the loop agent over a corpus directory and a model.
func researcher(dir string, model agent.Model) (*agent.LoopAgent[ResearchState], error) {
	typed, err := state.NewTyped[ResearchState]()
	if err != nil {
		return nil, err
	}
	schema, err := agent.SchemaFromJSON("Decision", []byte(decisionSchema))
	if err != nil {
		return nil, err
	}
	read, err := agent.NewTool("read_source", "Read a section of the paper", func(ctx context.Context, tc agent.ToolContext, a readArgs) (any, error) {
		b, err := os.ReadFile(filepath.Join(dir, "corpus", filepath.Base(a.Source)+".txt"))
		if err != nil {
			return nil, fmt.Errorf("no section %q", a.Source)
		}
		return strings.TrimSpace(string(b)), nil
	})
	if err != nil {
		return nil, err
	}
	return &agent.LoopAgent[ResearchState]{
		Name:  "researcher",
		Typed: typed,
		Tools: []agent.Tool{read},
		InitState: func(ctx context.Context, task agent.Task) (ResearchState, error) {
			return ResearchState{Base: state.NewBase(task.Objective, 10)}, nil
		},
		Prepare: func(ctx context.Context, s ResearchState) (string, error) {
			return fmt.Sprintf("Task: %s\nSources read: %v\nNotes: %v\nConfidence: %.1f", s.Task, s.SourcesVisited, s.Scratchpad, s.Confidence), nil
		},
		Decide: func(ctx context.Context, s ResearchState, obs string) (agent.Decision, error) {
			res, err := agent.GenerateStructured(ctx, model, agent.Request{Step: "decide",
				Messages: []agent.Message{{Role: agent.RoleUser, Content: obs}}}, schema, 2)
			if err != nil {
				return agent.Decision{}, err
			}
			var d agent.Decision
			if err := json.Unmarshal(res.Value, &d); err != nil {
				return agent.Decision{}, err
			}
			return d, d.Validate()
		},
		Reduce: func(ctx context.Context, s ResearchState, obs string, d agent.Decision, rs []agent.ActionResult) (state.Update, error) {
			if d.Mode != agent.ModeAct {
				return nil, nil
			}
			upd := state.Update{}
			var notes, sources []string
			for i, r := range rs {
				var a readArgs
				_ = json.Unmarshal(d.Actions[i].Args, &a)
				if r.Status != agent.ActionSuccess {
					notes = append(notes, "could not read "+a.Source+": "+r.Error)
					continue
				}
				var text string
				_ = json.Unmarshal(r.Output, &text)
				notes, sources = append(notes, text), append(sources, a.Source)
			}
			upd["scratchpad"], upd["sources_visited"] = notes, sources
			upd["confidence"] = min(1, s.Confidence+0.3*float64(len(sources)))
			return upd, nil
		},
	}, nil
}

func main() {
	storeURL := flag.String("store", envOr("CAIRN_STORE", sqlite.DefaultURL), "store URL")
	dir := flag.String("dir", "examples/research-agent", "the example's directory (corpus/, decisions.yaml)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *storeURL, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "research-agent:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, out io.Writer, storeURL, dir string) error {
	s, err := store.Open(context.Background(), storeURL, store.OpenOptions{})
	if err != nil {
		return err
	}
	defer s.Close()
	runs := []struct {
		thread string
		budget agent.TaskBudget
	}{{"research-final", agent.TaskBudget{}}, {"research-budget", agent.TaskBudget{MaxSteps: 2}}}
	for _, r := range runs {
		model, err := scripted.Load(filepath.Join(dir, "decisions.yaml"))
		if err != nil {
			return err
		}
		a, err := researcher(dir, model)
		if err != nil {
			return err
		}
		task := agent.Task{ID: r.thread, Objective: "Summarize the findings of the paper", Budget: r.budget,
			Resources:       []agent.Resource{{Kind: "dir", Path: filepath.Join(dir, "corpus"), Required: true}},
			SuccessCriteria: []string{"Summary covers abstract, methods, and conclusions"}}
		thread := r.thread
		if _, err := s.Thread(ctx, thread); err == nil {
			thread = fmt.Sprintf("%s-%d", r.thread, os.Getpid())
		}
		res, err := a.Run(ctx, s, thread, task, flow.Options{})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: stop reason %s after %d steps, success %v, sources %v\n", thread, res.StopReason, res.Steps, res.Success, res.State.SourcesVisited)
		if res.FinalResult != nil {
			fmt.Fprintf(out, "  final result: %s\n", *res.FinalResult)
		}
	}
	return nil
}
