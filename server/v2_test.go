package server_test

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// cmd runs a protocol command and returns its reply.
func (ts *testServer) cmd(thread string, id int, method string, params any) map[string]any {
	ts.t.Helper()
	return ts.json("POST", "/threads/"+thread+"/commands", map[string]any{"id": id, "method": method, "params": params}, 200)
}

// v2Until reads a thread's protocol events (all channels, after since)
// until stop says so.
func (ts *testServer) v2Until(thread string, since int64, stop func(method string, data map[string]any) bool) []sse {
	ts.t.Helper()
	body := map[string]any{"channels": []string{"values", "updates", "messages", "lifecycle", "input", "checkpoints", "tasks", "custom", "tools"}}
	if since > 0 {
		body["since"] = since
	}
	return ts.stream("POST", "/threads/"+thread+"/stream/events", body, "", func(e sse) bool {
		var ev struct {
			Params struct {
				Data map[string]any `json:"data"`
			} `json:"params"`
		}
		_ = json.Unmarshal(e.Data, &ev)
		return stop(e.Event, ev.Params.Data)
	})
}

func lifecycleIs(event string) func(string, map[string]any) bool {
	return func(method string, data map[string]any) bool {
		return method == "lifecycle" && data["event"] == event
	}
}

func TestV2BadEnvelopes(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"not JSON", "/threads/t/commands", `{"id":1,`, `"path":"$"`},
		{"no id", "/threads/t/commands", `{"method":"state.get"}`, `"path":"$.id"`},
		{"negative id", "/threads/t/commands", `{"id":-1,"method":"state.get"}`, `"path":"$.id"`},
		{"id not a number", "/threads/t/commands", `{"id":"1","method":"state.get"}`, `"path":"$.id"`},
		{"no method", "/threads/t/commands", `{"id":1}`, `"path":"$.method"`},
		{"params not an object", "/threads/t/commands", `{"id":1,"method":"state.get","params":[1]}`, `"path":"$.params"`},
		{"no channels", "/threads/t/stream/events", `{"channels":[]}`, `"path":"$.channels"`},
		{"unknown channel", "/threads/t/stream/events", `{"channels":["values","debug"]}`, `"path":"$.channels[1]"`},
		{"negative depth", "/threads/t/stream/events", `{"channels":["values"],"depth":-1}`, `"path":"$.depth"`},
		{"unknown field", "/threads/t/stream/events", `{"channels":["values"],"sinse":3}`, `"path":"$.sinse"`},
		{"no such thread", "/threads/nope/stream/events", `{"channels":["values"]}`, `not found`},
		{"a command on no thread", "/threads/nope/commands", `{"id":1,"method":"state.get"}`, `not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := ts.do("POST", tc.path, tc.body)
			if code/100 != 4 || !strings.Contains(string(b), tc.want) {
				t.Fatalf("%d %s, want a 4xx naming %s", code, b, tc.want)
			}
		})
	}
	if _, b := ts.do("GET", "/threads/t", nil); !strings.Contains(string(b), "not found") {
		t.Fatalf("a refused command made the thread: %s", b)
	}
}

func TestV2CommandErrors(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	ts.json("POST", "/threads", map[string]any{"thread_id": "fresh"}, 200)
	for _, tc := range []struct {
		name, method string
		params       any
		code         string
	}{
		{"unknown method", "run.stop", nil, "unknown_command"},
		{"reconnect", "subscription.reconnect", map[string]any{"run_id": "r"}, "not_supported"},
		{"run.start without an assistant", "run.start", map[string]any{"input": map[string]any{}}, "invalid_argument"},
		{"run.start of no assistant", "run.start", map[string]any{"assistant_id": "nope", "input": map[string]any{}}, "invalid_argument"},
		{"run.start without input on a thread at its start", "run.start", map[string]any{"assistant_id": "drafts"}, "invalid_argument"},
		{"respond without an interrupt id", "input.respond", map[string]any{"response": true}, "invalid_argument"},
		{"respond on a thread with no run", "input.respond", map[string]any{"interrupt_id": "x", "response": true}, "no_such_interrupt"},
		{"inject on a thread with no run", "input.inject", map[string]any{"message": map[string]any{"role": "user", "content": "hi"}}, "no_such_run"},
		{"inject a message of a role", "input.inject", map[string]any{"message": map[string]any{"role": "ai", "content": "hi"}}, "invalid_argument"},
		{"subscribe to no channel", "subscription.subscribe", map[string]any{"channels": []string{}}, "invalid_argument"},
		{"fork without a checkpoint", "state.fork", map[string]any{}, "invalid_argument"},
		{"wrong type", "state.get", map[string]any{"keys": "drafts"}, "invalid_argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.cmd("fresh", 7, tc.method, tc.params)
			if r["type"] != "error" || r["error"] != tc.code || r["id"] != float64(7) || r["message"] == "" {
				t.Fatalf("%v, want error %s", r, tc.code)
			}
		})
	}
	if calls.Load() != 0 {
		t.Fatalf("a refused command ran the graph %d times", calls.Load())
	}
}

// TestV2Interrupts runs a graph that asks for approval through the
// protocol: the interrupt comes as an input request, an answer sent while
// the run is still on its way waits for the question, a wrong id is
// refused naming the pending one, the right one — sent to another server
// on the store — resumes the run; the stream goes on across the runs,
// numbered in order.
func TestV2Interrupts(t *testing.T) {
	var calls atomic.Int64
	st := inmem.Open(store.Options{})
	ts := newServer(t, st, approvalGraph(t, &calls, 40*time.Millisecond))
	start := ts.cmd("t1", 1, "run.start", map[string]any{"assistant_id": "drafts", "input": map[string]any{}})
	if start["type"] != "success" {
		t.Fatalf("run.start: %v", start)
	}
	// Sent at once, while the drafts are written: it waits for the interrupt.
	began := time.Now()
	wrong := ts.cmd("t1", 2, "input.respond", map[string]any{"interrupt_id": "not-it", "response": true})
	if wrong["error"] != "no_such_interrupt" || time.Since(began) < 80*time.Millisecond {
		t.Fatalf("a wrong answer sent early: %v after %v", wrong, time.Since(began))
	}
	evs := ts.v2Until("t1", 0, lifecycleIs("interrupted"))
	var asked map[string]any
	for _, e := range evs {
		if e.Event == "input.requested" {
			var ev struct {
				Params struct{ Data map[string]any } `json:"params"`
			}
			_ = json.Unmarshal(e.Data, &ev)
			asked = ev.Params.Data
		}
	}
	if asked == nil || asked["payload"] != "publish?" {
		t.Fatalf("no input request for the interrupt: %v", asked)
	}
	if !strings.Contains(wrong["message"].(string), asked["interrupt_id"].(string)) {
		t.Fatalf("the refusal does not name the pending interrupt: %v", wrong)
	}
	last := evs[len(evs)-1]
	var lastEv struct{ Seq int64 }
	_ = json.Unmarshal(last.Data, &lastEv)
	// The answer goes to another server on the store (a reload, a
	// restart): it finds the pending interrupt there.
	ts = newServer(t, st, approvalGraph(t, &calls, 40*time.Millisecond))
	ok := ts.cmd("t1", 3, "input.respond", map[string]any{"interrupt_id": asked["interrupt_id"], "response": true, "namespace": []string{}})
	if ok["type"] != "success" {
		t.Fatalf("respond: %v", ok)
	}
	next := ts.v2Until("t1", lastEv.Seq, lifecycleIs("completed"))
	var first struct{ Seq int64 }
	_ = json.Unmarshal(next[0].Data, &first)
	if first.Seq <= lastEv.Seq {
		t.Fatalf("the resumed run's events are numbered %d, after %d", first.Seq, lastEv.Seq)
	}
	got := ts.cmd("t1", 4, "state.get", map[string]any{"keys": []string{"approved"}})
	values := got["result"].(map[string]any)["values"].(map[string]any)
	if values["approved"] != true || len(values) != 1 {
		t.Fatalf("state.get: %v", got)
	}
	tree := ts.cmd("t1", 5, "agent.getTree", nil)
	if tree["result"].(map[string]any)["tree"].(map[string]any)["status"] != "completed" {
		t.Fatalf("agent.getTree: %v", tree)
	}
	again := ts.cmd("t1", 6, "run.start", map[string]any{"assistant_id": "drafts"})
	if again["error"] != "invalid_argument" {
		t.Fatalf("a run without input at the thread's end would run nothing: %v", again)
	}
}

// TestV2TimeTravel starts a run from an earlier checkpoint (the SDK's
// forkFrom, sent as config.configurable.checkpoint_id) and forks with
// state.fork: each runs from the checkpoint named.
func TestV2TimeTravel(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	ts.cmd("t2", 1, "run.start", map[string]any{"assistant_id": "drafts", "input": map[string]any{}})
	ts.v2Until("t2", 0, lifecycleIs("interrupted"))
	list := ts.cmd("t2", 2, "state.listCheckpoints", map[string]any{"limit": 50})
	cps := list["result"].(map[string]any)["checkpoints"].([]any)
	var oneDraft string
	for _, c := range cps {
		cp := c.(map[string]any)
		st := ts.json("GET", "/threads/t2/state/"+cp["id"].(string), nil, 200)
		if d, _ := st["values"].(map[string]any)["drafts"].([]any); len(d) == 1 && cp["node_name"] == "write" {
			oneDraft = cp["id"].(string)
		}
	}
	if oneDraft == "" {
		t.Fatalf("no checkpoint with one draft, next write: %v", cps)
	}
	before := calls.Load()
	r := ts.cmd("t2", 3, "run.start", map[string]any{"assistant_id": "drafts", "input": nil, "config": map[string]any{"configurable": map[string]any{"checkpoint_id": oneDraft}}})
	if r["type"] != "success" {
		t.Fatalf("run.start from a checkpoint: %v", r)
	}
	ts.v2Until("t2", 0, lifecycleIs("interrupted"))
	if n := calls.Load() - before; n != 2 {
		t.Fatalf("from the checkpoint with one draft the run wrote %d drafts, want 2", n)
	}
	f := ts.cmd("t2", 4, "state.fork", map[string]any{"checkpoint_id": oneDraft})
	if f["type"] != "success" || f["result"].(map[string]any)["run_id"] == "" {
		t.Fatalf("state.fork: %v", f)
	}
}
