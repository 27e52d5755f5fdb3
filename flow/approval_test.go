package flow_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestApprovals answers a pause before a step, and a node's Interrupt,
// with each action: the outcome, and the audit trail in the next
// checkpoint's metadata.
func TestApprovals(t *testing.T) {
	schema := state.MustSchema(state.WithField("draft", state.ReducerReplace), state.WithField("sent", state.ReducerReplace), state.WithField("answer", state.ReducerReplace))
	g, err := flow.NewGraph(schema).
		AddNode("write", func(context.Context, state.Doc) (state.Update, error) { return state.Update{"draft": "v1"}, nil }).
		AddNode("send", func(_ context.Context, s state.Doc) (state.Update, error) {
			var d string
			_ = s.Get("draft", &d)
			return state.Update{"sent": d}, nil
		}).
		AddNode("ask", func(ctx context.Context, s state.Doc) (state.Update, error) {
			var a flow.Approval
			if err := flow.Interrupt(ctx, "ok?", &a); err != nil {
				return nil, err
			}
			return state.Update{"answer": a.Action + ":" + a.Reason}, nil
		}).
		Chain("write", "send", "ask").Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		before    flow.Approval // answers the pause before send
		at        flow.Approval // answers ask's Interrupt
		sent      string
		answer    string
		stop      state.StopReason
		auditedAt int // checkpoints after the pause that carries the audit
	}{
		{name: "approve", before: flow.Approval{Action: "approve", By: "ann"}, at: flow.Approval{Action: "approve", By: "bob"}, sent: "v1", answer: "approve:", stop: state.StopSuccess},
		{name: "edit", before: flow.Approval{Action: "edit", Value: json.RawMessage(`{"draft": "v2"}`), By: "ann"}, at: flow.Approval{Action: "reject", Reason: "no", By: "bob"}, sent: "v2", answer: "reject:no", stop: state.StopSuccess},
		{name: "reject", before: flow.Approval{Action: "reject", Reason: "wrong customer", By: "ann"}, stop: state.StopCancelledImmediate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := inmem.Open(store.Options{})
			ctx := context.Background()
			r, err := flow.NewRunner(g, s, flow.Options{InterruptBefore: []string{"send"}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Invoke(ctx, "t", state.Update{})
			if err != nil || res.StopReason != state.StopInterrupt {
				t.Fatalf("invoke: %v %v", res.StopReason, err)
			}
			paused := res.Head
			res, err = r.Resume(ctx, "t", tc.before)
			if tc.stop == state.StopCancelledImmediate {
				if err != nil || res.StopReason != tc.stop || res.State.Has("sent") || len(res.Next) != 0 {
					t.Fatalf("reject: %v %v sent=%v next=%v", res.StopReason, err, res.State.Has("sent"), res.Next)
				}
			} else {
				if err != nil || res.StopReason != state.StopInterrupt {
					t.Fatalf("resume before send: %v %v", res.StopReason, err)
				}
				if res, err = r.Resume(ctx, "t", tc.at); err != nil || res.StopReason != tc.stop {
					t.Fatalf("resume at ask: %v %v", res.StopReason, err)
				}
				var sent, answer string
				_ = res.State.Get("sent", &sent)
				_ = res.State.Get("answer", &answer)
				if sent != tc.sent || answer != tc.answer {
					t.Fatalf("sent %q answer %q, want %q %q", sent, answer, tc.sent, tc.answer)
				}
			}
			// The checkpoint after the pause records who answered, and how.
			next, err := s.Load(ctx, store.LoadRequest{Thread: "t", Seq: paused + 1})
			if err != nil {
				t.Fatal(err)
			}
			audit, _ := json.Marshal(next.Meta.Extra[flow.ApprovalKey])
			var got flow.Approval
			if err := json.Unmarshal(audit, &got); err != nil || got.Action != tc.before.Action || got.By != "ann" || got.At.IsZero() || got.Reason != tc.before.Reason {
				t.Fatalf("audit %s (%v)", audit, err)
			}
		})
	}
	t.Run("bad answer", func(t *testing.T) {
		s := inmem.Open(store.Options{})
		r, _ := flow.NewRunner(g, s, flow.Options{InterruptBefore: []string{"send"}})
		if _, err := r.Invoke(context.Background(), "t", state.Update{}); err != nil {
			t.Fatal(err)
		}
		for _, a := range []flow.Approval{{Action: "maybe"}, {Action: "edit", Value: json.RawMessage(`"text"`)}} {
			th, _ := s.Thread(context.Background(), "t")
			if _, err := r.Resume(context.Background(), "t", a); err == nil {
				t.Fatalf("%+v accepted", a)
			}
			if after, _ := s.Thread(context.Background(), "t"); after.Head != th.Head {
				t.Fatalf("%+v committed something", a)
			}
		}
	})
}
