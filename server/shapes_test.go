package server_test

import (
	"context"
	"encoding/json"
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
