package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestDebugCheckpointPayload: a debug event of type checkpoint carries the
// checkpoint and its parent as history shows them (checkpoint,
// parent_checkpoint; null for the first), as LangGraph's do.
func TestDebugCheckpointPayload(t *testing.T) {
	schema := state.MustSchema(state.WithField("n", state.ReducerReplace))
	g, err := flow.NewGraph(schema).
		AddNode("one", func(context.Context, state.Doc) (state.Update, error) { return state.Update{"n": 1}, nil }).
		AddEdge(flow.START, "one").Compile()
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, inmem.Open(store.Options{}), &runs.Graph{ID: "one", Graph: g})
	ts.json("POST", "/threads", map[string]any{"thread_id": "t1"}, 200)
	evs := ts.stream("POST", "/threads/t1/runs/stream", map[string]any{"assistant_id": "one", "input": map[string]any{}, "stream_mode": "debug"}, "", nil)
	var seen int
	for _, ev := range evs {
		var d struct {
			Type    string `json:"type"`
			Payload struct {
				Config           struct{ Configurable json.RawMessage }  `json:"config"`
				ParentConfig     *struct{ Configurable json.RawMessage } `json:"parent_config"`
				Checkpoint       json.RawMessage                         `json:"checkpoint"`
				ParentCheckpoint json.RawMessage                         `json:"parent_checkpoint"`
			} `json:"payload"`
		}
		if ev.Event != "debug" || json.Unmarshal(ev.Data, &d) != nil || d.Type != "checkpoint" {
			continue
		}
		p := d.Payload
		if string(p.Checkpoint) != string(p.Config.Configurable) {
			t.Fatalf("checkpoint %s, config %s", p.Checkpoint, p.Config.Configurable)
		}
		if seen == 0 && string(p.ParentCheckpoint) != "null" || seen > 0 && (p.ParentConfig == nil || string(p.ParentCheckpoint) != string(p.ParentConfig.Configurable)) {
			t.Fatalf("event %d: parent_checkpoint %s", seen, p.ParentCheckpoint)
		}
		seen++
	}
	if seen < 2 {
		t.Fatalf("%d debug checkpoint events in %v", seen, evs)
	}
}

// messagesGraph streams an AI reply in chunks (agent), then returns a tool
// message whole (tool), as LangGraph's test agent does.
func messagesGraph(t *testing.T) *runs.Graph {
	t.Helper()
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
	g, err := flow.NewGraph(schema).
		AddNode("agent", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			for _, piece := range []string{"be", "gin"} {
				if err := flow.EmitMessage(ctx, map[string]string{"id": "m1", "text": piece}); err != nil {
					return nil, err
				}
			}
			return state.Update{"messages": []map[string]any{{"type": "ai", "content": "begin", "id": "m1"}}}, nil
		}).
		AddNode("tool", func(context.Context, state.Doc) (state.Update, error) {
			return state.Update{"messages": []map[string]any{{"type": "tool", "content": "done", "id": "t1", "tool_call_id": "c1"}}}, nil
		}).
		AddEdge(flow.START, "agent").AddEdge("agent", "tool").Compile()
	if err != nil {
		t.Fatal(err)
	}
	return &runs.Graph{ID: "talk", Graph: g}
}

// TestMessagesModes: messages mode completes each message once
// (messages/complete: the input's, then each node's, the last event of the
// stream), and an AI message's complete content is its last partial;
// messages-tuple sends, besides the chunks, each message a node returns
// whole (the tool's), once — as LangGraph's streams do.
func TestMessagesModes(t *testing.T) {
	ts := newServer(t, inmem.Open(store.Options{}), messagesGraph(t))
	input := map[string]any{"messages": []map[string]any{{"type": "human", "content": "hi", "id": "h1"}}}
	evs := ts.stream("POST", "/runs/stream", map[string]any{"assistant_id": "talk", "input": input, "stream_mode": "messages"}, "", nil)
	var completed []string
	var lastPartial string
	for _, ev := range evs {
		switch ev.Event {
		case "metadata", "messages/metadata":
		case "messages/partial":
			var ms []struct{ Content string }
			_ = json.Unmarshal(ev.Data, &ms)
			lastPartial = ms[0].Content
		case "messages/complete":
			var ms []struct{ ID, Content string }
			_ = json.Unmarshal(ev.Data, &ms)
			for _, m := range ms {
				completed = append(completed, m.ID)
				if m.ID == "m1" && m.Content != lastPartial {
					t.Fatalf("m1 completes as %q, last partial %q", m.Content, lastPartial)
				}
			}
		default:
			t.Fatalf("event %s in messages mode", ev.Event)
		}
	}
	if fmt.Sprint(completed) != "[h1 m1 t1]" || evs[len(evs)-1].Event != "messages/complete" {
		t.Fatalf("completed %v; last event %s", completed, evs[len(evs)-1].Event)
	}
	evs = ts.stream("POST", "/runs/stream", map[string]any{"assistant_id": "talk", "input": input, "stream_mode": "messages-tuple"}, "", nil)
	var tuple []string
	for _, ev := range evs {
		if ev.Event == "messages" {
			var pair []struct {
				ID, Type, Content string
			}
			_ = json.Unmarshal(ev.Data, &pair)
			tuple = append(tuple, pair[0].Type+":"+pair[0].Content)
		}
	}
	if fmt.Sprint(tuple) != "[AIMessageChunk:be AIMessageChunk:gin tool:done]" {
		t.Fatalf("messages-tuple events %v", tuple)
	}
}

// TestEventsMode: stream_mode "events" sends LangChain's event stream
// (astream_events v2) as LangGraph's server does: the graph's and each
// node's on_chain_start/on_chain_end, and for a model's streamed message
// on_chat_model_start, a stream event per chunk and on_chat_model_end
// with the whole message, in order, each with its name, run id, parents
// and metadata.
func TestEventsMode(t *testing.T) {
	ts := newServer(t, inmem.Open(store.Options{}), messagesGraph(t))
	input := map[string]any{"messages": []map[string]any{{"type": "human", "content": "hi", "id": "h1"}}}
	evs := ts.stream("POST", "/runs/stream", map[string]any{"assistant_id": "talk", "input": input, "stream_mode": "events"}, "", nil)
	var seq []string
	var text string
	kinds := map[string]bool{}
	for _, ev := range evs {
		if ev.Event == "metadata" {
			continue
		}
		if ev.Event != "events" {
			t.Fatalf("event %s in events mode", ev.Event)
		}
		var se struct {
			RunID     string `json:"run_id"`
			Data      map[string]json.RawMessage
			ParentIDs []string `json:"parent_ids"`
			Metadata  map[string]any
		}
		if err := json.Unmarshal(ev.Data, &se); err != nil {
			t.Fatal(err)
		}
		var e struct{ Event, Name string }
		_ = json.Unmarshal(ev.Data, &e)
		kinds[e.Event] = true
		seq = append(seq, e.Event+":"+e.Name)
		if e.Event == "on_chat_model_stream" {
			var chunk struct{ Content string }
			_ = json.Unmarshal(se.Data["chunk"], &chunk)
			text += chunk.Content
		}
		if e.Event == "on_chat_model_end" && !strings.Contains(string(se.Data["output"]), `"content":"begin"`) {
			t.Fatalf("the model's end holds %s", se.Data["output"])
		}
		if se.Metadata["thread_id"] == nil || se.RunID == "" || (e.Name != "LangGraph" && len(se.ParentIDs) != 1) {
			t.Fatalf("event %s: metadata %v, parents %v", e.Event, se.Metadata, se.ParentIDs)
		}
	}
	want := []string{"on_chain_start", "on_chain_end", "on_chat_model_start", "on_chat_model_stream", "on_chat_model_end"}
	for _, k := range want {
		if !kinds[k] {
			t.Fatalf("no %s in %v", k, seq)
		}
	}
	if text != "begin" || seq[0] != "on_chain_start:LangGraph" || seq[len(seq)-1] != "on_chain_end:LangGraph" {
		t.Fatalf("text %q; events %v", text, seq)
	}
	if i, j := slices.Index(seq, "on_chat_model_end:model"), slices.Index(seq, "on_chat_model_start:model"); i < j || j < 0 {
		t.Fatalf("the model ends before it starts: %v", seq)
	}
}

// TestReturnedMessageWithoutID: messages-tuple sends a message a node
// returns without an id too, with the id the state gives it (as the
// updates stream shows it, and as LangGraph's reducer writes it into the
// update); what is not a message (no content, no type or role) is not
// sent.
func TestReturnedMessageWithoutID(t *testing.T) {
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
	g, err := flow.NewGraph(schema).
		AddNode("tool", func(context.Context, state.Doc) (state.Update, error) {
			return state.Update{"messages": []any{map[string]any{"type": "tool", "content": "no id", "tool_call_id": "c1"}, map[string]any{"note": "not a message"}}}, nil
		}).
		AddEdge(flow.START, "tool").Compile()
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, inmem.Open(store.Options{}), &runs.Graph{ID: "quiet", Graph: g})
	ts.json("POST", "/threads", map[string]any{"thread_id": "q"}, 200)
	evs := ts.stream("POST", "/threads/q/runs/stream", map[string]any{"assistant_id": "quiet", "input": map[string]any{}, "stream_mode": "messages-tuple"}, "", nil)
	var sent []string
	for _, ev := range evs {
		if ev.Event == "messages" {
			sent = append(sent, string(ev.Data))
		}
	}
	if len(sent) != 1 || !strings.Contains(sent[0], `"content":"no id"`) {
		t.Fatalf("sent %v", sent)
	}
	var tuple []map[string]any
	if err := json.Unmarshal([]byte(sent[0]), &tuple); err != nil || len(tuple) != 2 {
		t.Fatalf("sent %s: %v", sent[0], err)
	}
	st := ts.json("GET", "/threads/q/state", nil, 200)
	if id := st["values"].(map[string]any)["messages"].([]any)[0].(map[string]any)["id"]; id != tuple[0]["id"] || id == nil {
		t.Fatalf("the message's id: sent %v, stored %v", tuple[0]["id"], id)
	}
}

// TestResumedStreamStartsAtItsCheckpoint: a run that goes on from a
// thread's head (a resume) sends, in debug mode, that checkpoint first —
// so a client that joins the first run's debug checkpoints with the
// second's, less its first, has the thread's history, as LangGraph's
// suite checks.
func TestResumedStreamStartsAtItsCheckpoint(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	ts.json("POST", "/threads", map[string]any{"thread_id": "d"}, 200)
	type ref struct{ ID, Parent string }
	checkpoints := func(evs []sse) []ref {
		var out []ref
		for _, e := range evs {
			var d struct {
				Type    string
				Payload struct {
					Checkpoint struct {
						CheckpointID string `json:"checkpoint_id"`
					}
					ParentCheckpoint *struct {
						CheckpointID string `json:"checkpoint_id"`
					} `json:"parent_checkpoint"`
				}
			}
			if e.Event != "debug" || json.Unmarshal(e.Data, &d) != nil || d.Type != "checkpoint" {
				continue
			}
			r := ref{ID: d.Payload.Checkpoint.CheckpointID}
			if d.Payload.ParentCheckpoint != nil {
				r.Parent = d.Payload.ParentCheckpoint.CheckpointID
			}
			out = append(out, r)
		}
		return out
	}
	first := checkpoints(ts.stream("POST", "/threads/d/runs/stream", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "stream_mode": "debug"}, "", nil))
	head := ts.json("GET", "/threads/d/state", nil, 200)["checkpoint"].(map[string]any)["checkpoint_id"]
	second := checkpoints(ts.stream("POST", "/threads/d/runs/stream", map[string]any{"assistant_id": "drafts", "command": map[string]any{"resume": true}, "stream_mode": "debug"}, "", nil))
	if len(second) == 0 || second[0].ID != head {
		t.Fatalf("the resumed run's first checkpoint %v, the head it goes on from %v", second, head)
	}
	_, b := ts.do("POST", "/threads/d/history", map[string]any{"limit": 100})
	var hist []struct {
		Checkpoint struct {
			CheckpointID string `json:"checkpoint_id"`
		}
		ParentCheckpoint *struct {
			CheckpointID string `json:"checkpoint_id"`
		} `json:"parent_checkpoint"`
	}
	_ = json.Unmarshal(b, &hist)
	var want []ref
	for i := len(hist) - 1; i >= 0; i-- {
		r := ref{ID: hist[i].Checkpoint.CheckpointID}
		if p := hist[i].ParentCheckpoint; p != nil {
			r.Parent = p.CheckpointID
		}
		want = append(want, r)
	}
	if got := append(first, second[1:]...); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the streams' checkpoints %v, the history %v", got, want)
	}
}
