package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestApprovalGate pauses before a gate marked approval: true; approving
// runs it, editing changes what it reads, rejecting leaves the pipeline
// FAILED (finished) with the gate not run.
func TestApprovalGate(t *testing.T) {
	p := loadPipeline(t, "name: ap\nmetadata: {domain: d, feature: f}\ngates:\n  - {gate: 1, name: First, step: first}\n  - {gate: 2, name: Second, step: second, approval: true}\n")
	for _, tc := range []struct {
		name   string
		answer any
		ran    string // what gate 2 read ("" if it did not run)
		status string
	}{
		{"approve", flow.Approval{Action: "approve", By: "ann"}, `{"v":"a"}`, "SUCCESS"},
		{"nil answer goes on", nil, `{"v":"a"}`, "SUCCESS"},
		{"edit", flow.Approval{Action: "edit", Value: json.RawMessage(`{"gates": {"1": {"gate": 1, "agent": "First", "status": "SUCCESS", "output": {"v": "edited"}, "validation": {"score": 100, "issues": [], "passed": true}}}}`), By: "ann"}, `{"v":"edited"}`, "SUCCESS"},
		{"reject", flow.Approval{Action: "reject", Reason: "not now", By: "ann"}, "", "FAILED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var read string
			steps := map[string]pipeline.GateStep{
				"first": func(context.Context, json.RawMessage) (json.RawMessage, error) {
					return json.RawMessage(`{"v":"a"}`), nil
				},
				"second": func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
					read = string(in)
					return in, nil
				},
			}
			s := inmem.Open(store.Options{})
			ctx := context.Background()
			cfg := pipeline.Config{Store: s, Thread: "t", Steps: steps}
			res, err := pipeline.Run(ctx, p, cfg)
			if err != nil || res.Result.StopReason != state.StopInterrupt || read != "" {
				t.Fatalf("first run: %v %v (gate 2 read %q)", res.Result.StopReason, err, read)
			}
			head, err := s.Load(ctx, store.LoadRequest{Thread: "t"})
			if err != nil {
				t.Fatal(err)
			}
			if g, ok := res.WaitingAt(); !ok || g != 2 {
				t.Fatalf("the result waits at gate %d (%v), want 2", g, ok)
			}
			if g, ok := pipeline.Waiting(head); !ok || g != 2 {
				t.Fatalf("the head waits at gate %d (%v), want 2", g, ok)
			}
			cfg.Answer = tc.answer
			res, err = pipeline.Run(ctx, p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var compact string
			if read != "" {
				var v any
				_ = json.Unmarshal([]byte(read), &v)
				b, _ := json.Marshal(v)
				compact = string(b)
			}
			if _, ok := res.WaitingAt(); ok {
				t.Fatal("an answered run still waits")
			}
			if compact != tc.ran || res.Pipeline.Status != tc.status {
				t.Fatalf("gate 2 read %q, pipeline %s; want %q, %s", read, res.Pipeline.Status, tc.ran, tc.status)
			}
			// A finished pipeline refuses another run.
			if _, err := pipeline.Run(ctx, p, cfg); !errors.Is(err, pipeline.ErrFinished) {
				t.Fatalf("run after the end: %v", err)
			}
		})
	}
}
