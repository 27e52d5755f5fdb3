// Command quickstart runs a small research workflow on Cairn's embedded
// store and shows what the store keeps: every step committed, the run
// resumable after a crash, the history inspectable and forkable with the
// cairn CLI.
//
//	go run ./examples/quickstart                 # thread "quickstart" in .cairn/state.db
//	go run ./examples/quickstart --crash-after 3 # stop hard after step 3...
//	go run ./examples/quickstart                 # ...and finish from step 4
//
// The workflow is a flow graph: six nodes in a chain, each a plain function
// that reads the typed state and returns a partial update; the schema's
// reducers merge them (messages: add_messages, kv: key-value merge, tokens:
// add), and the runner commits each step before the next starts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/flow/baserules"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	_ "github.com/cairn-dev/cairn/store/inmem"
	_ "github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// Research is the workflow's typed state.
type Research struct {
	state.Base
	state.KVSection
	Messages []state.Message `json:"messages" cairn:"messages"`
	Tokens   int             `json:"tokens" cairn:"add"`
}

func say(id, text string) state.Message {
	return state.Message{ID: id, Role: "assistant", Content: text}
}

// node adapts a function of the typed state to a flow node.
func node(typed *state.Typed[Research], fn func(s Research) state.Update) flow.NodeFunc {
	return func(ctx context.Context, d state.Doc) (state.Update, error) {
		s, err := typed.Decode(d)
		if err != nil {
			return nil, err
		}
		return fn(s), nil
	}
}

// workflow builds the graph: plan → read ×3 → draft → finish.
func workflow(typed *state.Typed[Research]) (*flow.Compiled, error) {
	steps := []struct {
		name string
		fn   func(s Research) state.Update
	}{
		{"plan", func(s Research) state.Update {
			return state.Update{"messages": []state.Message{{ID: "q", Role: "user", Content: s.Task}, say("plan", "Plan: read the abstract, the method, the results; then summarise.")}, "tokens": 40}
		}},
		{"read_abstract", func(Research) state.Update {
			return state.Update{"kv": map[string]any{"abstract": "Checkpoint stores grow quadratically when they copy state."}, "tokens": 120}
		}},
		{"read_method", func(Research) state.Update {
			return state.Update{"kv": map[string]any{"method": "Store patches; snapshot only when patches outweigh the last snapshot."}, "tokens": 150}
		}},
		{"read_results", func(Research) state.Update {
			return state.Update{"kv": map[string]any{"results": "Bytes grow with what changed, not with the size of the state."}, "tokens": 130}
		}},
		{"draft", func(s Research) state.Update {
			return state.Update{"messages": say("draft", fmt.Sprintf("Draft from %d notes: store deltas, not copies.", len(s.KV))), "tokens": 90}
		}},
		{"finish", func(Research) state.Update {
			return state.Update{"messages": say("draft", "Summary: keep patches per step and rare snapshots; history stays cheap."), // replaces the draft by id
				"final_result": "Keep patches per step and rare snapshots.", "tokens": 60}
		}},
	}
	// The state embeds state.Base: its rules count current_step, stop at
	// max_steps and when final_result is set.
	g := flow.NewGraph(typed.Schema()).WithRules(baserules.Rules())
	var names []string
	for _, st := range steps {
		g.AddNode(st.name, node(typed, st.fn))
		names = append(names, st.name)
	}
	return g.Chain(names...).Compile()
}

func main() {
	storeURL := flag.String("store", envOr("CAIRN_STORE", sqlite.DefaultURL), "store URL")
	thread := flag.String("thread", "quickstart", "thread id")
	crashAfter := flag.Int("crash-after", 0, "exit with status 3 right after step N is committed, as a crash would")
	flag.Parse()
	crash := func() { os.Exit(3) }
	code, err := run(context.Background(), os.Stdout, *storeURL, *thread, *crashAfter, crash)
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
	}
	os.Exit(code)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// run starts or resumes the thread. crash is called right after step
// crashAfter commits (main exits the process there).
func run(ctx context.Context, out io.Writer, storeURL, thread string, crashAfter int, crash func()) (int, error) {
	typed, err := state.NewTyped[Research]()
	if err != nil {
		return 1, err
	}
	g, err := workflow(typed)
	if err != nil {
		return 1, err
	}
	s, err := store.Open(context.Background(), storeURL, store.OpenOptions{})
	if err != nil {
		return 1, err
	}
	defer s.Close()
	steps := 0
	r, err := flow.NewRunner(g, s, flow.Options{Observer: func(e flow.Event) {
		if e.Kind != flow.EventStepEnd {
			return
		}
		steps++
		fmt.Fprintf(out, "  step %-13s committed as checkpoint %d\n", strings.Join(e.Nodes, ","), e.Seq)
		if crashAfter > 0 && steps == crashAfter {
			fmt.Fprintln(out, "  stopping hard, as asked")
			crash()
		}
	}})
	if err != nil {
		return 1, err
	}
	var res flow.Result
	head, err := s.Load(ctx, store.LoadRequest{Thread: thread})
	switch {
	case errors.Is(err, store.ErrNotFound):
		fmt.Fprintf(out, "started thread %q in %s\n", thread, storeURL)
		input := state.Update{"task": "Why do checkpoint stores grow so fast?", "max_steps": 10, "current_step": 0, "schema_version": 1}
		res, err = r.Invoke(ctx, thread, input)
		if err != nil {
			return exitCode(ctx), err
		}
	case err != nil:
		return 1, err
	default:
		fmt.Fprintf(out, "resuming thread %q at checkpoint %d\n", thread, head.Seq)
		if res, err = r.Resume(ctx, thread, nil); err != nil {
			return exitCode(ctx), err
		}
	}
	st, err := typed.Decode(res.State)
	if err != nil {
		return 1, err
	}
	final := "-"
	if st.FinalResult != nil {
		final = *st.FinalResult
	}
	fmt.Fprintf(out, "done: %s (stop reason %s, %d steps, %d tokens, head checkpoint %d)\n", final, res.StopReason, st.CurrentStep, st.Tokens, res.Head)
	return 0, nil
}

// exitCode is 3 when the run was stopped on purpose, else 1.
func exitCode(ctx context.Context) int {
	if ctx.Err() != nil {
		return 3
	}
	return 1
}
