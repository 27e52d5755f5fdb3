// Command quickstart runs a small research workflow on Cairn's embedded
// store and shows what the store keeps: every step committed, the run
// resumable after a crash, the history inspectable and forkable with the
// cairn CLI.
//
//	go run ./examples/quickstart                 # thread "quickstart" in .cairn/state.db
//	go run ./examples/quickstart --crash-after 3 # stop hard after step 3...
//	go run ./examples/quickstart                 # ...and finish from step 4
//
// The steps are plain functions that return partial updates; the schema's
// reducers merge them (messages: add_messages, notes: key-value merge,
// tokens: add). Each step's patch is committed before the next starts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/storeurl"
)

// step is one node of the workflow: it reads the state and returns an update.
type step struct {
	name string
	run  func(s Research) state.Update
}

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

var workflow = []step{
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
		n := len(s.KV)
		return state.Update{"messages": say("draft", fmt.Sprintf("Draft from %d notes: store deltas, not copies.", n)), "tokens": 90}
	}},
	{"finish", func(s Research) state.Update {
		return state.Update{"messages": say("draft", "Summary: keep patches per step and rare snapshots; history stays cheap."), // replaces the draft by id
			"final_result": "Keep patches per step and rare snapshots.", "stop_reason": state.StopFinal, "tokens": 60}
	}},
}

func main() {
	storeURL := flag.String("store", envOr("CAIRN_STORE", storeurl.Default), "store URL")
	thread := flag.String("thread", "quickstart", "thread id")
	crashAfter := flag.Int("crash-after", 0, "exit with status 3 right after committing this step (to show resume)")
	flag.Parse()
	code, err := run(context.Background(), os.Stdout, *storeURL, *thread, *crashAfter)
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

// errCrash stands for a process that dies right after a commit.
var errCrash = errors.New("stopping hard after the commit, as asked")

func run(ctx context.Context, out io.Writer, storeURL, thread string, crashAfter int) (int, error) {
	typed, err := state.NewTyped[Research]()
	if err != nil {
		return 1, err
	}
	s, err := storeurl.Open(storeURL, store.Options{}, "")
	if err != nil {
		return 1, err
	}
	defer s.Close()

	// Resume from the head if the thread exists; else commit the input.
	var doc state.Doc
	var head int64
	cp, err := s.Load(ctx, store.LoadRequest{Thread: thread})
	switch {
	case err == nil:
		doc, head = cp.State, cp.Seq
		fmt.Fprintf(out, "resuming thread %q at checkpoint %d\n", thread, head)
	case errors.Is(err, store.ErrNotFound):
		input, err := typed.Encode(Research{Base: state.NewBase("Why do checkpoint stores grow so fast?", len(workflow))})
		if err != nil {
			return 1, err
		}
		cp, err := s.Append(ctx, store.Checkpoint{Thread: thread, Patch: input.AsPatch(), State: input, Meta: store.Meta{Source: "input", Next: []string{workflow[0].name}}})
		if err != nil {
			return 1, err
		}
		doc, head = input, cp.Seq
		fmt.Fprintf(out, "started thread %q in %s\n", thread, storeURL)
	default:
		return 1, err
	}

	for {
		st, err := typed.Decode(doc)
		if err != nil {
			return 1, err
		}
		if st.Stopped() || st.CurrentStep >= len(workflow) {
			fmt.Fprintf(out, "done: %s (stop reason %s, %d tokens, %d checkpoints)\n", deref(st.FinalResult), deref((*string)(st.StopReason)), st.Tokens, head)
			return 0, nil
		}
		node := workflow[st.CurrentStep]
		upd := node.run(st)
		upd["current_step"] = st.CurrentStep + 1
		next, patch, err := typed.Apply(doc, upd)
		if err != nil {
			return 1, fmt.Errorf("step %s: %w", node.name, err)
		}
		meta := store.Meta{Source: "step"}
		if st.CurrentStep+1 < len(workflow) {
			meta.Next = []string{workflow[st.CurrentStep+1].name}
		}
		cp, err := s.Append(ctx, store.Checkpoint{Thread: thread, Parent: head, Nodes: []string{node.name}, Patch: patch, State: next, Meta: meta})
		if err != nil {
			return 1, fmt.Errorf("commit %s: %w", node.name, err)
		}
		doc, head = next, cp.Seq
		fmt.Fprintf(out, "  step %d %-13s committed as checkpoint %d (%d ops)\n", st.CurrentStep+1, node.name, cp.Seq, len(patch))
		if crashAfter > 0 && st.CurrentStep+1 == crashAfter {
			return 3, errCrash
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
