package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// countGraph asks how many to send ({count: 1..10}, a response schema)
// and stores the answer.
func countGraph(t *testing.T) *runs.Graph {
	t.Helper()
	c, err := flow.NewGraph(state.MustSchema(state.WithField("count", state.ReducerReplace))).
		AddNode("ask", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			var a struct {
				Count int `json:"count"`
			}
			schema := json.RawMessage(`{"type":"object","properties":{"count":{"type":"integer","minimum":1,"maximum":10}},"required":["count"]}`)
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

// TestResponseSchemaOverHTTP: the interrupt's response_schema shows in
// the thread's state, its interrupts and GET /interrupts; an answer that
// does not fit (a command's resume, an approval's value) is a 422 naming
// the interrupt and the place, and the thread does not move; one that
// fits resumes.
func TestResponseSchemaOverHTTP(t *testing.T) {
	ts := newServer(t, inmem.Open(store.Options{}), countGraph(t))
	for _, tc := range []struct {
		name, path string
		body       map[string]any
		at         string // the 422's place; "" when the answer fits
	}{
		{name: "resume wrong type", path: "/runs/wait", body: map[string]any{"command": map[string]any{"resume": map[string]any{"count": "two"}}}, at: "$.command.resume.count"},
		{name: "resume too many", path: "/runs/wait", body: map[string]any{"command": map[string]any{"resume": map[string]any{"count": 11}}}, at: "$.command.resume.count"},
		{name: "resume not an object", path: "/runs/wait", body: map[string]any{"command": map[string]any{"resume": 3}}, at: "$.command.resume"},
		{name: "answer bad value", path: "/answer", body: map[string]any{"action": "edit", "value": map[string]any{"count": 0}}, at: "$.value.count"},
		{name: "resume fits", path: "/runs/wait", body: map[string]any{"command": map[string]any{"resume": map[string]any{"count": 2}}}},
		{name: "answer fits", path: "/answer", body: map[string]any{"action": "edit", "value": map[string]any{"count": 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := strings.ReplaceAll(tc.name, " ", "-")
			ts.json("POST", "/threads", map[string]any{"thread_id": th}, 200)
			ts.json("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "count", "input": map[string]any{}}, 200)
			st := ts.json("GET", "/threads/"+th+"/state", nil, 200)
			ins := st["interrupts"].([]any)
			if len(ins) != 1 || ins[0].(map[string]any)["response_schema"] == nil {
				t.Fatalf("state interrupts %v", st["interrupts"])
			}
			id := ins[0].(map[string]any)["id"].(string)
			task := st["tasks"].([]any)[0].(map[string]any)
			if tin := task["interrupts"].([]any); len(tin) != 1 || tin[0].(map[string]any)["response_schema"] == nil {
				t.Fatalf("task interrupts %v", task)
			}
			for _, list := range []string{"/interrupts?status=pending", "/threads/" + th + "/interrupts"} {
				code, b := ts.do("GET", list, nil)
				if code != 200 || !strings.Contains(string(b), `"response_schema":{`) {
					t.Fatalf("GET %s: %d %s", list, code, b)
				}
			}
			path := "/threads/" + th + "/runs/wait"
			body := tc.body
			if tc.path == "/answer" {
				path = "/threads/" + th + "/interrupts/" + id + "/answer"
			} else {
				body["assistant_id"] = "count"
			}
			if tc.at == "" {
				ts.json("POST", path, body, 200)
				if v := waitState(t, ts, th); v["count"] == nil {
					t.Fatalf("resumed state %v", v)
				}
				return
			}
			code, b := ts.do("POST", path, body)
			if code != 422 || !strings.Contains(string(b), tc.at) || !strings.Contains(string(b), id) {
				t.Fatalf("POST %s: %d %s, want a 422 at %s naming %s", path, code, b, tc.at, id)
			}
			after := ts.json("GET", "/threads/"+th+"/state", nil, 200)
			if after["checkpoint"].(map[string]any)["checkpoint_id"] != st["checkpoint"].(map[string]any)["checkpoint_id"] {
				t.Fatal("a refused answer moved the thread")
			}
			if runs := ts.json("GET", "/threads/"+th+"/runs", nil, 200)["list"].([]any); len(runs) != 1 {
				t.Fatalf("a refused answer made a run: %d runs", len(runs))
			}
		})
	}
}

// waitState waits for the thread to be idle and returns its values.
func waitState(t *testing.T, ts *testServer, th string) map[string]any {
	t.Helper()
	ts.json("GET", "/threads/"+th+"/runs", nil, 200)
	for range 200 {
		st := ts.json("GET", "/threads/"+th, nil, 200)
		if st["status"] == "idle" {
			return st["values"].(map[string]any)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the thread did not become idle")
	return nil
}
