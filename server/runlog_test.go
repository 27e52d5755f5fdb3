package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// bigGraph is approvalGraph behind a subgraph step that adds a large note
// to a messages field, so that every state is far larger than what a step
// changes.
func bigGraph(t *testing.T) *runs.Graph {
	t.Helper()
	child, err := flow.NewGraph(state.MustSchema(state.WithField("notes", state.ReducerAppend))).
		AddNode("note", func(context.Context, state.Doc) (state.Update, error) {
			return state.Update{"notes": strings.Repeat("n", 100)}, nil
		}).AddEdge(flow.START, "note").Compile()
	if err != nil {
		t.Fatal(err)
	}
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages), state.WithField("drafts", state.ReducerAppend), state.WithField("approved", state.ReducerReplace))
	g, err := flow.NewGraph(schema).
		AddNode("grow", func(_ context.Context, s state.Doc) (state.Update, error) {
			n, _ := s.ListLen("messages")
			return state.Update{"messages": state.Message{Role: "assistant", Content: fmt.Sprintf("%d %s", n, strings.Repeat("m", 8000))}}, nil
		}).
		AddNode("sub", flow.Subgraph(child, flow.SubgraphOptions{
			Input:  func(context.Context, state.Doc) (state.Update, error) { return state.Update{}, nil },
			Output: func(context.Context, state.Doc) (state.Update, error) { return state.Update{}, nil },
		})).
		AddNode("approve", func(ctx context.Context, s state.Doc) (state.Update, error) {
			var ok bool
			if err := flow.Interrupt(ctx, "publish?", &ok); err != nil {
				return nil, err
			}
			return state.Update{"approved": ok}, nil
		}).
		AddEdge(flow.START, "grow").
		AddRouter("grow", func(_ context.Context, s state.Doc) ([]flow.Target, error) {
			if n, _ := s.ListLen("messages"); n%20 != 0 {
				return flow.To("grow"), nil
			}
			return flow.To("sub"), nil
		}).
		AddEdge("sub", "approve").
		AddEdge("approve", flow.END).Compile()
	if err != nil {
		t.Fatal(err)
	}
	return &runs.Graph{ID: "big", Graph: g}
}

// TestRunLogReplay: a run's stream read back from the store later — by
// another server, after the run ended — is byte for byte what the live
// stream sent, in every mode, subgraphs and a pause's final values
// included; and the log keeps references, not copies of the state: its
// stored bytes stay far below what the stream sent.
func TestRunLogReplay(t *testing.T) {
	stores := map[string]func(t *testing.T) store.Store{
		"memory": func(*testing.T) store.Store { return inmem.Open(store.Options{}) },
		"sqlite": func(t *testing.T) store.Store {
			s, err := sqlite.OpenStore(context.Background(), filepath.Join(t.TempDir(), "replay.db"), sqlite.Options{}, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			live := newServer(t, st, bigGraph(t))
			live.json("POST", "/threads", map[string]any{"thread_id": "t1"}, 200)
			var sent, changes, events int
			var evs []sse
			for turn := range 2 { // the second turn answers the first's pause
				body := map[string]any{"assistant_id": "big", "input": map[string]any{}, "stream_mode": []string{"values", "updates", "checkpoints", "debug", "tasks"}, "stream_subgraphs": true}
				if turn == 1 {
					body = map[string]any{"assistant_id": "big", "command": map[string]any{"resume": true}, "stream_mode": []string{"values", "checkpoints"}}
				}
				evs = live.stream("POST", "/threads/t1/runs/stream", body, "", nil)
				for _, e := range evs {
					sent += len(e.Data)
					if strings.HasPrefix(e.Event, "updates") {
						changes += len(e.Data)
					}
				}
				events += len(evs)
				checkReplay(t, st, evs)
			}
			if sent < 1_000_000 {
				t.Fatalf("the streams sent %d bytes: the states are too small to tell a copy from a reference", sent)
			}
			// What the log may keep: the updates (what the steps changed),
			// once per mode that shows them (updates; the tasks' results in
			// tasks and debug), and a small record per event.
			logged := loggedBytes(t, st, "t1")
			if limit := 3*changes + 200*events; logged > limit {
				t.Fatalf("the run logs keep %d bytes for %d streamed, %d of them updates, in %d events: they copy state", logged, sent, changes, events)
			}
			t.Logf("%s: streamed %d bytes (%d of updates) in %d events, logged %d", name, sent, changes, events, logged)
		})
	}
}

// checkReplay reads a finished run's stream from the store through a
// server that never ran it, whole and from its middle, and compares it
// with what was streamed live.
func checkReplay(t *testing.T, st store.Store, live []sse) {
	t.Helper()
	var md struct {
		RunID string `json:"run_id"`
	}
	if len(live) == 0 || live[0].Event != "metadata" || json.Unmarshal(live[0].Data, &md) != nil {
		t.Fatalf("the stream does not start with its metadata: %v", live)
	}
	other := newServer(t, st, bigGraph(t))
	path := "/threads/t1/runs/" + md.RunID + "/stream"
	if got := other.stream("GET", path, nil, "", nil); sseText(got) != sseText(live) {
		t.Fatalf("replayed stream differs from the live one:\n got %s\nwant %s", clip(sseText(got)), clip(sseText(live)))
	}
	mid := len(live) / 2
	if got := other.stream("GET", path, nil, live[mid].ID, nil); sseText(got) != sseText(live[mid+1:]) {
		t.Fatalf("replay after %s differs:\n got %s\nwant %s", live[mid].ID, clip(sseText(got)), clip(sseText(live[mid+1:])))
	}
	kinds := map[string]bool{}
	for _, e := range live {
		kinds[strings.SplitN(e.Event, "|", 2)[0]] = true
	}
	for _, k := range []string{"values", "checkpoints"} {
		if !kinds[k] {
			t.Fatalf("no %s event streamed: %v", k, kinds)
		}
	}
}

func sseText(evs []sse) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%s %s %s\n", e.ID, e.Event, e.Data)
	}
	return b.String()
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}

// loggedBytes is what the run logs of a thread's runs keep.
func loggedBytes(t *testing.T, st store.Store, thread string) int {
	t.Helper()
	rl, err := store.RunLogOf(st)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := rl.Runs(context.Background(), store.RunQuery{Thread: thread})
	if err != nil || len(runs) == 0 {
		t.Fatalf("runs: %v, %v", runs, err)
	}
	n, refs := 0, 0
	for _, r := range runs {
		evs, err := rl.Events(context.Background(), r.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			n += len(ev.Data)
			if ev.Ref != nil {
				refs++
			}
		}
	}
	if refs == 0 {
		t.Fatal("no logged event refers to a checkpoint")
	}
	return n
}

// TestStateEventsRedaction: what a stream builds from the state is
// redacted by the server for an assistant that commits its state as it
// is, live and read back alike; for one that redacts what it commits
// (Options.Redact) it is the state as stored.
func TestStateEventsRedaction(t *testing.T) {
	const secret = "sk-abcdefghijklmnopqrstuvwx"
	for _, redacts := range []bool{false, true} {
		t.Run(fmt.Sprintf("redacts=%v", redacts), func(t *testing.T) {
			g, err := flow.NewGraph(state.MustSchema(state.WithField("note", state.ReducerReplace))).
				AddNode("leak", func(context.Context, state.Doc) (state.Update, error) {
					return state.Update{"note": "the key is " + secret}, nil
				}).AddEdge(flow.START, "leak").Compile()
			if err != nil {
				t.Fatal(err)
			}
			a := &runs.Graph{ID: "leak", Graph: g}
			if redacts {
				a.Options.Redact = redact.Default()
			}
			st := inmem.Open(store.Options{})
			ts := newServer(t, st, a)
			ts.json("POST", "/threads", map[string]any{"thread_id": "t1"}, 200)
			live := ts.stream("POST", "/threads/t1/runs/stream", map[string]any{"assistant_id": "leak", "input": map[string]any{}, "stream_mode": []string{"values", "checkpoints"}}, "", nil)
			if strings.Contains(sseText(live), secret) || !strings.Contains(sseText(live), redact.Replacement) {
				t.Fatalf("the stream shows the secret, or nothing redacted:\n%s", sseText(live))
			}
			checkReplay(t, st, live)
			_, body := ts.do("GET", "/threads/t1/state", nil)
			if stored := strings.Contains(string(body), secret); stored == redacts {
				t.Fatalf("state as stored (assistant redacts: %v): %s", redacts, body)
			}
		})
	}
}
