package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// approvalAgent writes an agent file that drafts, then pauses before it
// sends; timeout (if any) bounds the pause.
func approvalAgent(t *testing.T, timeout string) []runs.Assistant {
	t.Helper()
	bound := ""
	if timeout != "" {
		bound = "approval: {timeout: " + timeout + ", fallback: reject}\n"
	}
	files := map[string]string{
		"approval.md":           "---\nname: approval\nmodel: {provider: scripted, script: replies/approval.yaml}\nchain:\n  - {id: draft, kind: text, prompt_section: \"step:draft\"}\n  - {id: send, kind: text, prompt_section: \"step:send\"}\ninterrupt_before: [send]\n" + bound + "---\n\n## step:draft\n\nDraft.\n\n## step:send\n\nSend.\n",
		"replies/approval.yaml": "replies:\n  - {step: draft, text: \"draft text\"}\n  - {step: send, text: \"sent\"}\n",
	}
	return assistantsFrom(t, files)
}

// assistantsFrom writes files (names relative to a new folder, scripts
// under replies/) and loads the assistants of the folder.
func assistantsFrom(t *testing.T, files map[string]string) []runs.Assistant {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "replies"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	as, err := runs.LoadAssistants(dir, runs.AssistantConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return as
}

type pending struct {
	InterruptID string          `json:"interrupt_id"`
	ThreadID    string          `json:"thread_id"`
	AssistantID string          `json:"assistant_id"`
	Node        string          `json:"node"`
	Value       json.RawMessage `json:"value"`
	ExpiresAt   *string         `json:"expires_at"`
}

func (ts *testServer) pending(query string) []pending {
	ts.t.Helper()
	code, b := ts.do("GET", "/interrupts?status=pending"+query, nil)
	var out []pending
	if code != 200 || json.Unmarshal(b, &out) != nil {
		ts.t.Fatalf("GET /interrupts: %d %s", code, b)
	}
	return out
}

// TestApprovalsOverHTTP pauses three threads before "send" and answers
// them: approve sends, edit sends the edited draft, reject stops; each
// answer is recorded, with who and when, in the next checkpoint.
func TestApprovalsOverHTTP(t *testing.T) {
	ts := newServer(t, inmem.Open(store.Options{}), approvalAgent(t, "")...)
	for _, id := range []string{"approve", "edit", "reject"} {
		ts.json("POST", "/threads", map[string]any{"thread_id": id, "metadata": map[string]any{"case": id}}, 200)
		ts.json("POST", "/threads/"+id+"/runs/wait", map[string]any{"assistant_id": "approval", "input": "hi"}, 200)
	}
	all := ts.pending("&assistant_id=approval")
	if len(all) != 3 || all[0].Node != "send" || all[0].AssistantID != "approval" || all[0].ExpiresAt != nil {
		t.Fatalf("pending: %+v", all)
	}
	if got := ts.pending(`&metadata={"case":"edit"}`); len(got) != 1 || got[0].ThreadID != "edit" {
		t.Fatalf("filtered by metadata: %+v", got)
	}
	ids := map[string]string{}
	for _, p := range all {
		ids[p.ThreadID] = p.InterruptID
	}
	answers := map[string]map[string]any{
		"approve": {"action": "approve", "by": "ann"},
		"edit":    {"action": "edit", "value": map[string]any{"steps": map[string]any{"draft": "edited draft"}}, "by": "ann"},
		"reject":  {"action": "reject", "reason": "wrong customer", "by": "ann"},
	}
	for id, body := range answers {
		run := ts.json("POST", "/threads/"+id+"/interrupts/"+ids[id]+"/answer", body, 200)
		ts.json("GET", fmt.Sprintf("/threads/%s/runs/%s/join", id, run["run_id"]), nil, 200)
		// A second answer finds nothing pending.
		if code, b := ts.do("POST", "/threads/"+id+"/interrupts/"+ids[id]+"/answer", body); code != 409 {
			t.Fatalf("%s answered twice: %d %s", id, code, b)
		}
	}
	for id, want := range map[string]string{"approve": `"draft":"draft text","send":"sent"`, "edit": `"draft":"edited draft","send":"sent"`, "reject": `"steps":{"draft":"draft text"}`} {
		st := ts.json("GET", "/threads/"+id+"/state", nil, 200)
		b, _ := json.Marshal(st["values"])
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: state %s lacks %s", id, b, want)
		}
		th := ts.json("GET", "/threads/"+id, nil, 200)
		if th["status"] != "idle" {
			t.Errorf("%s: thread %v", id, th["status"])
		}
		if !strings.Contains(auditOf(ts, id), `"by":"ann"`) {
			t.Errorf("%s: no audit by ann in %s", id, auditOf(ts, id))
		}
	}
	if !strings.Contains(auditOf(ts, "reject"), `"reason":"wrong customer"`) {
		t.Errorf("reject's reason not recorded: %s", auditOf(ts, "reject"))
	}
	if len(ts.pending("")) != 0 {
		t.Fatalf("still pending: %+v", ts.pending(""))
	}
	for _, bad := range []map[string]any{{"action": "maybe"}, {"action": "edit", "value": "text"}, {"action": "approve", "colour": 1}} {
		if code, b := ts.do("POST", "/threads/approve/interrupts/x/answer", bad); code != 422 {
			t.Errorf("%v: %d %s", bad, code, b)
		}
	}
}

// auditOf is the approval recorded in a thread's history.
func auditOf(ts *testServer, thread string) string {
	hist := ts.json("POST", "/threads/"+thread+"/history", map[string]any{"limit": 100}, 200)["list"].([]any)
	for _, h := range hist {
		cairn := h.(map[string]any)["metadata"].(map[string]any)["cairn"].(map[string]any)
		if a, ok := cairn["approval"]; ok {
			b, _ := json.Marshal(a)
			return string(b)
		}
	}
	return ""
}

// TestApprovalTimeout: a pause nobody answers is answered by its
// fallback when its time is up, also on a tenant's thread (kept under its
// key, answered by its own id).
func TestApprovalTimeout(t *testing.T) {
	for _, tenant := range []string{"", "acme"} {
		t.Run("tenant "+tenant, func(t *testing.T) {
			s := inmem.Open(store.Options{})
			cfg := server.Config{Store: s, Assistants: approvalAgent(t, "300ms"), ExpiryCheck: 20 * time.Millisecond}
			key := ""
			if tenant != "" {
				ks, _ := store.KeysOf(s)
				var err error
				if key, _, err = server.NewKey(context.Background(), ks, tenant, "", time.Now()); err != nil {
					t.Fatal(err)
				}
				cfg.Keys = ks
			}
			srv, err := server.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ts := &testServer{t: t, srv: srv, url: newHTTP(t, srv), key: key}
			ts.json("POST", "/threads", map[string]any{"thread_id": "late"}, 200)
			ts.json("POST", "/threads/late/runs/wait", map[string]any{"assistant_id": "approval", "input": "hi"}, 200)
			if p := ts.pending(""); len(p) != 1 || p[0].ExpiresAt == nil {
				t.Fatalf("pending: %+v", p)
			}
			deadline := time.Now().Add(5 * time.Second)
			for len(ts.pending("")) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if a := auditOf(ts, "late"); !strings.Contains(a, `"action":"reject"`) || !strings.Contains(a, `"by":"timeout"`) {
				t.Fatalf("expired pause: audit %q", a)
			}
		})
	}
}

// TestChatReviewTimeout: a chat's tool review (approve_tools) nobody
// answers is answered by the file's fallback when its time is up — a
// reject, with the timeout as its reason: the tool never runs, the call is
// answered with that reason (a response) and the model goes on.
func TestChatReviewTimeout(t *testing.T) {
	files := map[string]string{
		"chat.md":           "---\nname: chat\nkind: chat\nmodel: {provider: scripted, script: replies/chat.yaml}\ntools: [list_files]\napprove_tools: all\napproval: {timeout: 300ms, fallback: reject}\n---\n\n## Instructions\n\nHelp.\n",
		"replies/chat.yaml": "replies:\n  - {user: files, tool_calls: [{name: list_files, args: {dir: .}}]}\n  - {text: done, repeat: true}\n",
	}
	srv, err := server.New(server.Config{Store: inmem.Open(store.Options{}), Assistants: assistantsFrom(t, files), ExpiryCheck: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, srv: srv, url: newHTTP(t, srv)}
	ts.json("POST", "/threads", map[string]any{"thread_id": "c1"}, 200)
	ts.json("POST", "/threads/c1/runs/wait", map[string]any{"assistant_id": "chat", "input": "which files?"}, 200)
	if p := ts.pending(""); len(p) != 1 || p[0].ExpiresAt == nil {
		t.Fatalf("pending: %+v", p)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(ts.pending("")) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	var st map[string]any
	for time.Now().Before(deadline) {
		if st = ts.json("GET", "/threads/c1", nil, 200); st["status"] == "idle" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	msgs := st["values"].(map[string]any)["messages"].([]any)
	if st["status"] != "idle" || len(msgs) != 4 {
		t.Fatalf("after the review timed out: %v, %v", st["status"], msgs)
	}
	tool, last := msgs[2].(map[string]any), msgs[3].(map[string]any)
	if tool["type"] != "tool" || tool["status"] != "error" || !strings.Contains(fmt.Sprint(tool["content"]), "no answer within") || last["content"] != "done" {
		t.Fatalf("the call was not answered with the timeout's reason, or the model not asked again: %v", msgs)
	}
	if a := auditOf(ts, "c1"); !strings.Contains(a, `"by":"timeout"`) {
		t.Fatalf("audit %q", a)
	}
}
