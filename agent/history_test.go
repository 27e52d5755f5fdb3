package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

func TestHistoryAdapter(t *testing.T) {
	ctx := context.Background()
	h := &agent.History{Store: inmem.Open(store.Options{})}
	if _, err := h.CreateThread(ctx, "conv", map[string]any{"user": "ada"}); err != nil {
		t.Fatal(err)
	}
	c, err := h.Load(ctx, "conv")
	if err != nil || len(c.Messages) != 0 || len(c.Results) != 0 {
		t.Fatalf("empty load: %+v %v", c, err)
	}
	if _, err := h.AppendUserMessage(ctx, "conv", "hello"); err != nil {
		t.Fatal(err)
	}
	r1 := agent.InferenceResult{Agent: "a", Input: "hello", Output: []agent.Message{{Role: agent.RoleAssistant, Content: "hi!"}}}
	r2 := agent.InferenceResult{Agent: "b", Input: "hello", Output: []agent.Message{{Role: agent.RoleAssistant, Content: "hey"}}}
	n, err := h.AppendResults(ctx, "conv", []agent.InferenceResult{r1})
	if err != nil || n != 1 {
		t.Fatalf("append 1: %d %v", n, err)
	}
	// A later run hands in everything it knows; only the new one is stored.
	n, err = h.AppendResults(ctx, "conv", []agent.InferenceResult{r1, r2})
	if err != nil || n != 1 {
		t.Fatalf("append new only: %d %v", n, err)
	}
	n, err = h.AppendResults(ctx, "conv", []agent.InferenceResult{r1, r2})
	if err != nil || n != 0 {
		t.Fatalf("nothing new: %d %v", n, err)
	}
	if _, err := h.AppendResults(ctx, "conv", []agent.InferenceResult{r2, r1}); !errors.Is(err, agent.ErrHistoryDiverged) {
		t.Fatalf("diverged: %v", err)
	}
	c, err = h.Load(ctx, "conv")
	if err != nil || len(c.Results) != 2 || len(c.Messages) != 3 || c.Messages[0].Content != "hello" || c.Messages[2].Content != "hey" || c.Head != 3 {
		t.Fatalf("load: %+v %v", c, err)
	}
	if _, err := h.Load(ctx, "ghost"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing thread: %v", err)
	}
}
