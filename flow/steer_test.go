package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// steerGraph loops node agent until it has run turns times; before it
// returns, send (if set) runs, as a user steering the run would.
func steerGraph(t *testing.T, turns int, send func(ctx context.Context, n int) error) *flow.Compiled {
	t.Helper()
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages), state.WithField("turns", state.ReducerAdd))
	g, err := flow.NewGraph(schema).
		AddNode("agent", func(ctx context.Context, d state.Doc) (state.Update, error) {
			var n int
			_ = d.Get("turns", &n)
			if send != nil {
				if err := send(ctx, n); err != nil {
					return nil, err
				}
			}
			k, _ := d.ListLen("messages")
			return state.Update{"turns": 1, "messages": []state.Message{{Type: "ai", Content: fmt.Sprintf("turn %d saw %d messages", n+1, k)}}}, nil
		}).
		AddEdge(flow.START, "agent").
		AddRouter("agent", func(ctx context.Context, d state.Doc) ([]flow.Target, error) {
			var n int
			_ = d.Get("turns", &n)
			if n < turns {
				return flow.To("agent"), nil
			}
			return flow.To(flow.END), nil
		}).Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func contents(t *testing.T, d state.Doc) []string {
	t.Helper()
	var msgs []state.Message
	if err := d.Get("messages", &msgs); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Type + ":" + m.Content
	}
	return out
}

// TestSteerTakenAtNextStep: messages sent while a step runs are taken
// before the next step, through the messages reducer, and the checkpoint
// of that step records the highest one; they are taken once, a step that
// fails leaves them pending, and a follow-up is not taken by the run.
func TestSteerTakenAtNextStep(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	ib, err := store.InboxOf(s)
	if err != nil {
		t.Fatal(err)
	}
	failOnce := true
	g := steerGraph(t, 3, func(ctx context.Context, n int) error {
		switch n {
		case 0:
			for _, m := range []string{`"also check the date"`, `{"type":"human","content":"and the total"}`} {
				if _, err := ib.Append(ctx, "th", 0, store.InboxSteer, json.RawMessage(m)); err != nil {
					return err
				}
			}
		case 1:
			if failOnce {
				failOnce = false
				if _, err := ib.Append(ctx, "th", 0, store.InboxSteer, json.RawMessage(`{"type":"human","content":"third"}`)); err != nil {
					return err
				}
				if _, err := ib.Append(ctx, "th", 0, store.InboxFollowUp, json.RawMessage(`{"type":"human","content":"later"}`)); err != nil {
					return err
				}
				return errors.New("boom")
			}
		}
		return nil
	})
	var steers []string
	r, err := flow.NewRunner(g, s, flow.Options{Inbox: ib, Observer: func(ev flow.Event) {
		if ev.Kind == flow.EventSteer {
			steers = append(steers, string(ev.Payload))
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Invoke(ctx, "th", state.Update{"messages": []state.Message{{Type: "human", Content: "extract the invoice"}}})
	if err == nil || res.StopReason != state.StopUnrecoverableError {
		t.Fatalf("first attempt: %v, %v", res.StopReason, err)
	}
	if res, err = r.Resume(ctx, "th", nil); err != nil || res.StopReason != state.StopSuccess {
		t.Fatalf("resume: %v, %v", res.StopReason, err)
	}
	// The string message is a human message. The failed attempt of step 2
	// took entries 1 and 2 without committing; its rerun took them again,
	// with the third, sent meanwhile.
	want := []string{"human:extract the invoice", "ai:turn 1 saw 1 messages", "human:also check the date", "human:and the total", "human:third", "ai:turn 2 saw 5 messages", "ai:turn 3 saw 6 messages"}
	if got := contents(t, res.State); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("messages:\n got %q\nwant %q", got, want)
	}
	head, err := s.Load(ctx, store.LoadRequest{Thread: "th"})
	if err != nil {
		t.Fatal(err)
	}
	if head.Meta.Usage == nil || head.Meta.Usage.Inbox != 3 {
		t.Fatalf("head usage: %+v", head.Meta.Usage)
	}
	if len(steers) != 2 || !strings.Contains(steers[0], `"entries":[1,2]`) || !strings.Contains(steers[1], `"entries":[1,2,3]`) {
		t.Fatalf("steer events: %q", steers)
	}
	// Each entry is recorded consumed by exactly one committed checkpoint.
	var cursors []int64
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: "th"}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.Meta.Usage != nil {
			cursors = append(cursors, cp.Meta.Usage.Inbox)
		}
	}
	if got := fmt.Sprint(cursors); got != "[3 3 0 0 0]" { // step 3, step 2 (took 1–3), the failed attempt, step 1, the input
		t.Fatalf("cursors, newest first: %s", got)
	}
	if left, _ := ib.Entries(ctx, "th", head.Meta.Usage.Inbox); len(left) != 1 || left[0].Kind != store.InboxFollowUp {
		t.Fatalf("left after the run: %+v", left)
	}
}

// TestSteerField: a state without a messages field takes no steering; a
// named field must exist.
func TestSteerField(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema *state.Schema
		field  string
		want   string
	}{
		{"messages", state.MustSchema(state.WithField("msgs", state.ReducerMessages)), "", "msgs"},
		{"named", state.MustSchema(state.WithField("notes", state.ReducerAppend)), "notes", "notes"},
		{"none", state.MustSchema(state.WithField("notes", state.ReducerAppend)), "", ""},
		{"unknown", state.MustSchema(state.WithField("msgs", state.ReducerMessages)), "nope", ""},
		{"two", state.MustSchema(state.WithField("a", state.ReducerMessages), state.WithField("b", state.ReducerMessages)), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := flow.SteerField(tc.schema, tc.field)
			if tc.want == "" {
				if !errors.Is(err, flow.ErrNoSteering) {
					t.Fatalf("got %q, %v", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v", got, err)
			}
		})
	}
}
