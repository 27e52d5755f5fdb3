package server_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestCommandsFromFrontEnds: what LangGraph's chat front ends send at a
// pause works — an approval as submit({}, {command: {resume}}) (an empty
// input beside the command), "mark as resolved" as command goto __end__
// (the thread ends where it stands, the paused node never runs) — and
// what Cairn cannot do answers 422 and changes nothing.
func TestCommandsFromFrontEnds(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	paused := func(id string) {
		ts.json("POST", "/threads", map[string]any{"thread_id": id}, 200)
		ts.json("POST", "/threads/"+id+"/runs/wait", map[string]any{"assistant_id": "drafts", "input": map[string]any{}}, 200)
		if st := ts.json("GET", "/threads/"+id, nil, 200); st["status"] != "interrupted" {
			t.Fatalf("%s: %v", id, st["status"])
		}
	}
	paused("approve")
	out := ts.json("POST", "/threads/approve/runs/wait", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "command": map[string]any{"resume": true}}, 200)
	if out["approved"] != true {
		t.Fatalf("resume beside an empty input: %v", out)
	}
	paused("resolve")
	head := ts.json("GET", "/threads/resolve/state", nil, 200)["checkpoint"]
	for i, bad := range []map[string]any{
		{"input": map[string]any{"x": 1}, "command": map[string]any{"resume": true}},
		{"command": map[string]any{"goto": "write"}},
		{"command": map[string]any{"goto": map[string]any{"node": "write", "input": 1}}},
		{"command": map[string]any{"goto": []string{"__end__", "write"}}},
		{"command": map[string]any{"goto": "__end__", "resume": true}},
		{"command": map[string]any{"update": "x"}},
		{"command": map[string]any{"update": []any{[]string{"drafts", "x"}}}},
	} {
		bad["assistant_id"] = "drafts"
		if code, b := ts.do("POST", "/threads/resolve/runs/wait", bad); code != 422 {
			t.Fatalf("bad command %d: %d %s", i, code, b)
		}
	}
	if now := ts.json("GET", "/threads/resolve/state", nil, 200)["checkpoint"]; fmt.Sprint(now) != fmt.Sprint(head) {
		t.Fatalf("a refused command moved the thread: %v -> %v", head, now)
	}
	for _, g := range []any{"__end__", []string{"__end__"}} {
		before := calls.Load()
		out = ts.json("POST", "/threads/resolve/runs/wait", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "command": map[string]any{"goto": g}}, 200)
		if _, ran := out["approved"]; ran || calls.Load() != before {
			t.Fatalf("goto %v ran the paused node or more: %v", g, out)
		}
		st := ts.json("GET", "/threads/resolve/state", nil, 200)
		if th := ts.json("GET", "/threads/resolve", nil, 200); th["status"] != "idle" || fmt.Sprint(st["next"]) != "[]" {
			t.Fatalf("after goto __end__: thread %v, next %v", th["status"], st["next"])
		}
	}
}

// TestInterruptShapes: a node's interrupt shows exactly the value the
// node passed (not Cairn's record of it), in the stream, the wait's
// answer, the state and the thread; a static pause (interrupt_before)
// shows no interrupt object — an empty __interrupt__ update, the next
// node, no task interrupts — as LangGraph does, while Cairn's approvals
// still list it.
func TestInterruptShapes(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	ts.json("POST", "/threads", map[string]any{"thread_id": "dyn"}, 200)
	evs := ts.stream("POST", "/threads/dyn/runs/stream", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "stream_mode": []string{"updates"}}, "", nil)
	last := string(evs[len(evs)-1].Data)
	if !strings.Contains(last, `"value":"publish?"`) {
		t.Fatalf("stream: %s", last)
	}
	st := ts.json("GET", "/threads/dyn/state", nil, 200)
	value := func(list any) any { return list.([]any)[0].(map[string]any)["value"] }
	task := st["tasks"].([]any)[0].(map[string]any)
	if value(st["interrupts"]) != "publish?" || value(task["interrupts"]) != "publish?" {
		t.Fatalf("state: %v", st)
	}
	th := ts.json("GET", "/threads/dyn", nil, 200)
	for _, ins := range th["interrupts"].(map[string]any) {
		if value(ins) != "publish?" {
			t.Fatalf("thread: %v", th)
		}
	}
	ts.json("POST", "/threads", map[string]any{"thread_id": "static"}, 200)
	out := ts.json("POST", "/threads/static/runs/wait", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "interrupt_before": []string{"approve"}}, 200)
	if _, ok := out["__interrupt__"]; ok {
		t.Fatalf("wait at a static pause: %v", out)
	}
	st = ts.json("GET", "/threads/static/state", nil, 200)
	if fmt.Sprint(st["next"]) != "[approve]" || fmt.Sprint(st["interrupts"]) != "[]" || strings.Contains(fmt.Sprint(st["tasks"]), "value") {
		t.Fatalf("state at a static pause: %v", st)
	}
	if th := ts.json("GET", "/threads/static", nil, 200); th["status"] != "interrupted" || fmt.Sprint(th["interrupts"]) != "map[]" {
		t.Fatalf("thread at a static pause: %v", th)
	}
	if p := ts.pending(""); len(p) != 2 {
		t.Fatalf("Cairn's approvals list both pauses: %+v", p)
	}
	ts.json("POST", "/threads", map[string]any{"thread_id": "static2"}, 200)
	evs = ts.stream("POST", "/threads/static2/runs/stream", map[string]any{"assistant_id": "drafts", "input": map[string]any{}, "interrupt_before": []string{"approve"}, "stream_mode": []string{"updates"}}, "", nil)
	if last := string(evs[len(evs)-1].Data); last != `{"__interrupt__":[]}` {
		t.Fatalf("stream at a static pause: %s", last)
	}
}

// TestCommandUpdate: command.update (LangGraph's Command(update=…)) as a
// run's input: beside resume at a node's interrupt, the update is applied
// and the node gets the answer; alone at the interrupt, the node asks
// again; on a finished thread it changes the state and runs nothing;
// with goto __end__ it changes the state and ends the thread. What has no
// state to update, or is not an object of fields, is a 422 that creates
// nothing.
func TestCommandUpdate(t *testing.T) {
	var calls atomic.Int64
	ts := newServer(t, inmem.Open(store.Options{}), approvalGraph(t, &calls, 0))
	paused := func(id string) {
		ts.json("POST", "/threads", map[string]any{"thread_id": id}, 200)
		ts.json("POST", "/threads/"+id+"/runs/wait", map[string]any{"assistant_id": "drafts", "input": map[string]any{}}, 200)
	}
	run := func(id string, cmd map[string]any) map[string]any {
		return ts.json("POST", "/threads/"+id+"/runs/wait", map[string]any{"assistant_id": "drafts", "command": cmd}, 200)
	}
	drafts := func(out map[string]any) string { return fmt.Sprint(out["drafts"]) }
	status := func(id string) any { return ts.json("GET", "/threads/"+id, nil, 200)["status"] }

	paused("both")
	before := calls.Load()
	out := run("both", map[string]any{"update": map[string]any{"drafts": "edited"}, "resume": true})
	if out["approved"] != true || drafts(out) != "[draft 1 draft 2 draft 3 edited]" || calls.Load() != before || status("both") != "idle" {
		t.Fatalf("update and resume: %v (write ran %d more times), %v", out, calls.Load()-before, status("both"))
	}
	out = run("both", map[string]any{"update": map[string]any{"approved": false}})
	if out["approved"] != false || calls.Load() != before || status("both") != "idle" {
		t.Fatalf("update of a finished thread: %v", out)
	}
	if next := ts.json("GET", "/threads/both/state", nil, 200)["next"]; fmt.Sprint(next) != "[]" {
		t.Fatalf("next after an update of a finished thread: %v", next)
	}

	paused("alone")
	out = run("alone", map[string]any{"update": map[string]any{"drafts": "x"}})
	if _, asks := out["__interrupt__"]; !asks || drafts(out) != "[draft 1 draft 2 draft 3 x]" || status("alone") != "interrupted" {
		t.Fatalf("update alone at the interrupt: %v, %v", out, status("alone"))
	}
	out = run("alone", map[string]any{"update": map[string]any{"drafts": "y"}, "goto": "__end__"})
	if _, ran := out["approved"]; ran || status("alone") != "idle" {
		t.Fatalf("update and goto __end__: %v, %v", out, status("alone"))
	}
	if st := ts.json("GET", "/threads/alone/state", nil, 200); !strings.Contains(fmt.Sprint(st["values"]), "y]") {
		t.Fatalf("the update before goto __end__ is lost: %v", st["values"])
	}

	ts.json("POST", "/threads", map[string]any{"thread_id": "empty"}, 200)
	for i, bad := range []struct{ path, thread string }{{"/threads/empty/runs/wait", "empty"}, {"/threads/nope/runs/wait", "nope"}, {"/runs/wait", ""}} {
		body := map[string]any{"assistant_id": "drafts", "if_not_exists": "create", "command": map[string]any{"update": map[string]any{"drafts": "x"}}}
		if bad.thread == "" {
			delete(body, "if_not_exists")
		}
		if code, b := ts.do("POST", bad.path, body); code != 422 || !strings.Contains(string(b), "$.command.update") {
			t.Fatalf("update %d with no state: %d %s", i, code, b)
		}
	}
	if code, _ := ts.do("GET", "/threads/nope", nil); code != 404 {
		t.Fatalf("a refused update made its thread: %d", code)
	}
}
