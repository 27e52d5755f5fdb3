package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
)

// TestLangGraphSDKResponseSchema runs server/sdktest/respschema.test.mjs,
// written with the official LangGraph JS SDK, against the server package
// serving "count", a Go graph whose node asks how many to send with a
// response schema ({count: an integer 1 to 10}): the schema in the
// thread's state and its interrupts, a bad answer refused with a 422 and
// the thread unchanged, a good one resuming.
func TestLangGraphSDKResponseSchema(t *testing.T) {
	node, dir := sdkSuite(t)
	addr := serveGoGraphs(t, "schema.db", nil, countGraph(t))
	runNode(t, node, dir, []string{"CAIRN_URL=" + addr}, "--test", "respschema.test.mjs")
}

// countGraph asks how many to send, with a response schema, and keeps
// the answer.
func countGraph(t *testing.T) *runs.Graph {
	t.Helper()
	schema := json.RawMessage(`{"type":"object","properties":{"count":{"type":"integer","minimum":1,"maximum":10}},"required":["count"]}`)
	c, err := flow.NewGraph(state.MustSchema(state.WithField("count", state.ReducerReplace))).
		AddNode("ask", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			var a struct {
				Count int `json:"count"`
			}
			if err := flow.Interrupt(ctx, "how many?", &a, flow.WithResponseSchema(schema)); err != nil {
				return nil, err
			}
			return state.Update{"count": a.Count}, nil
		}).
		Chain("ask").Compile()
	if err != nil {
		t.Fatal(err)
	}
	return &runs.Graph{ID: "count", Graph: c}
}
