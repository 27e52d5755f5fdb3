package agentfile_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// reviewChat is a chat whose read_file calls wait for review
// (approve_tools) while list_files runs without asking; its model calls
// both in one round, then answers with the last tool message. format is
// its review_format ("": the default).
func reviewChat(t testing.TB, format string) *agentfile.File {
	t.Helper()
	head := "tools: [list_files, read_file]\napprove_tools: [read_file]\n"
	if format != "" {
		head += "review_format: " + format + "\n"
	}
	a := chatFile(t, head, `replies:
  - user: notes
    tool_calls: [{name: list_files, args: {dir: .}}, {name: read_file, args: {path: notes.txt}}]
  - echo_tool: true
    repeat: true
`)
	os.WriteFile(filepath.Join(filepath.Dir(a.Path), "other.txt"), []byte("buy bread"), 0o644)
	return a
}

// pauseForReview runs the first turn of a reviewChat and checks its
// pause: a dynamic interrupt at tools whose value asks for the review of
// the one call that waits, in the file's format (LangChain's HITLRequest,
// or agent-inbox's HumanInterrupt list).
func pauseForReview(t testing.TB, a *agentfile.File, s store.Store, thread string) store.Checkpoint {
	t.Helper()
	ctx := context.Background()
	res, err := agentfile.Run(ctx, a, agentfile.RunConfig{Store: s, Thread: thread, Input: agentfile.TextInput("inline", "read my notes")})
	if err != nil || res.Result.StopReason != state.StopInterrupt {
		t.Fatalf("turn 1: %+v %v", res, err)
	}
	head, err := s.Load(ctx, store.LoadRequest{Thread: thread})
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Node  string
		Value json.RawMessage
	}
	if err := json.Unmarshal(head.Meta.Interrupt, &in); err != nil || in.Node != "tools" {
		t.Fatalf("interrupt %s: %v", head.Meta.Interrupt, err)
	}
	if a.ReviewFormat == agentfile.ReviewAgentInbox {
		checkHumanInterrupts(t, in.Value)
	} else {
		checkHITLRequest(t, in.Value)
	}
	return head
}

// checkHITLRequest: value is LangChain's HITLRequest for read_file.
func checkHITLRequest(t testing.TB, value json.RawMessage) {
	t.Helper()
	var req agentfile.HITLRequest
	if err := json.Unmarshal(value, &req); err != nil || len(req.ActionRequests) != 1 || len(req.ReviewConfigs) != 1 {
		t.Fatalf("HITLRequest %s: %v", value, err)
	}
	ar, rc := req.ActionRequests[0], req.ReviewConfigs[0]
	if ar.Name != "read_file" || string(ar.Args) != `{"path":"notes.txt"}` || !strings.Contains(ar.Description, "read_file") ||
		rc.ActionName != "read_file" || strings.Join(rc.AllowedDecisions, ",") != "approve,edit,reject" {
		t.Fatalf("HITLRequest %s", value)
	}
}

// checkHumanInterrupts: value is agent-inbox's HumanInterrupt list for
// read_file.
func checkHumanInterrupts(t testing.TB, value json.RawMessage) {
	t.Helper()
	var his []agentfile.HumanInterrupt
	if err := json.Unmarshal(value, &his); err != nil || len(his) != 1 {
		t.Fatalf("HumanInterrupt list %s: %v", value, err)
	}
	hi := his[0]
	if hi.ActionRequest.Action != "read_file" || string(hi.ActionRequest.Args) != `{"path":"notes.txt"}` || !hi.Config.AllowAccept || !hi.Config.AllowEdit ||
		!hi.Config.AllowRespond || !hi.Config.AllowIgnore || !strings.Contains(hi.Description, "read_file") {
		t.Fatalf("HumanInterrupt %+v", hi)
	}
}

// TestChatReviews: each decision of LangChain's HITLResponse, each answer
// of agent-inbox's HumanResponse, and each of Cairn's approvals, does what
// it says to the call under review, whichever format the file asks in;
// the call of a tool not listed runs without asking.
func TestChatReviews(t *testing.T) {
	tests := []struct {
		name   string
		answer any
		want   string // the final output
		types  string // the conversation's message types
		args   string // the reviewed call's arguments as the reply keeps them
	}{
		{"decision approve", json.RawMessage(`{"decisions": [{"type": "approve"}]}`), `"remember the milk"`, "human,ai,tool,tool,ai", `{"path":"notes.txt"}`},
		{"decision edit", json.RawMessage(`{"decisions": [{"type": "edit", "edited_action": {"name": "read_file", "args": {"path": "other.txt"}}}]}`), `"buy bread"`, "human,ai,tool,tool,ai", `{"path":"other.txt"}`},
		{"decision reject with a message", json.RawMessage(`{"decisions": [{"type": "reject", "message": "read the list instead"}]}`), `"read the list instead"`, "human,ai,tool,tool,ai", `{"path":"notes.txt"}`},
		{"decision reject", json.RawMessage(`{"decisions": [{"type": "reject"}]}`), `"the person rejected this tool call; it was not run"`, "human,ai,tool,tool,ai", `{"path":"notes.txt"}`},
		{"accept", json.RawMessage(`{"type": "accept", "args": null}`), `"remember the milk"`, "human,ai,tool,tool,ai", `{"path":"notes.txt"}`},
		{"accept list", json.RawMessage(`[{"type": "accept", "args": null}]`), `"remember the milk"`, "human,ai,tool,tool,ai", `{"path":"notes.txt"}`},
		{"edit", json.RawMessage(`[{"type": "edit", "args": {"action": "read_file", "args": {"path": "other.txt"}}}]`), `"buy bread"`, "human,ai,tool,tool,ai", `{"path":"other.txt"}`},
		{"response", json.RawMessage(`[{"type": "response", "args": "read the list instead"}]`), `"read the list instead"`, "human,ai,tool,tool,ai", `{"path":"notes.txt"}`},
		{"ignore", json.RawMessage(`[{"type": "ignore", "args": null}]`), `"the person ignored this tool call; it was not run"`, "human,ai,tool,tool", `{"path":"notes.txt"}`},
		{"approve", flow.Approval{Action: flow.ApprovalApprove, By: "ann"}, `"remember the milk"`, "human,ai,tool,tool,ai", `{"path":"notes.txt"}`},
		{"approval edit", flow.Approval{Action: flow.ApprovalEdit, Value: json.RawMessage(`{"read_file": {"path": "other.txt"}}`)}, `"buy bread"`, "human,ai,tool,tool,ai", `{"path":"other.txt"}`},
		{"reject with a reason", flow.Approval{Action: flow.ApprovalReject, Reason: "not my notes"}, `"not my notes"`, "human,ai,tool,tool,ai", `{"path":"notes.txt"}`},
		{"reject", flow.Approval{Action: flow.ApprovalReject}, `"the person ignored this tool call; it was not run"`, "human,ai,tool,tool", `{"path":"notes.txt"}`},
	}
	ctx := context.Background()
	for i, tc := range tests {
		format := []string{"", agentfile.ReviewLangChain, agentfile.ReviewAgentInbox}[i%3]
		t.Run(tc.name+"/"+format, func(t *testing.T) {
			a := reviewChat(t, format)
			s := inmem.Open(store.Options{})
			head := pauseForReview(t, a, s, "r")
			raw, _ := json.Marshal(tc.answer)
			if err := a.CheckResume(head, raw); err != nil {
				t.Fatalf("CheckResume: %v", err)
			}
			res, err := agentfile.Resume(ctx, a, agentfile.RunConfig{Store: s, Thread: "r", Answer: tc.answer})
			if err != nil || string(res.FinalOutput) != tc.want || res.Result.StopReason != state.StopSuccess {
				t.Fatalf("resumed: %s %+v %v", res.FinalOutput, res.Result, err)
			}
			ms := messagesOf(t, res.Result.State)
			var types []string
			for _, m := range ms {
				types = append(types, m.Type)
			}
			if strings.Join(types, ",") != tc.types || len(ms[1].ToolCalls) != 2 || string(ms[1].ToolCalls[1].Args) != tc.args || ms[1].ID != messagesOf(t, head.State)[1].ID {
				t.Fatalf("conversation %v, reply %+v", types, ms[1])
			}
			if !strings.Contains(ms[2].Content.(string), "notes.txt") {
				t.Fatalf("list_files did not run without asking: %+v", ms[2])
			}
		})
	}
}

// TestChatReviewAnswersChecked: a resume value that does not answer the
// calls under review is refused with the path of the problem.
func TestChatReviewAnswersChecked(t *testing.T) {
	tests := []struct{ name, answer, path string }{
		{"not a list", `"yes"`, "$"},
		{"too many", `[{"type": "accept"}, {"type": "accept"}]`, "$"},
		{"unknown type", `[{"type": "maybe", "args": null}]`, "$[0].type"},
		{"not an object", `[true]`, "$[0]"},
		{"edit of another tool", `[{"type": "edit", "args": {"action": "write_file", "args": {}}}]`, "$[0].args.action"},
		{"edit without arguments", `[{"type": "edit", "args": {"action": "read_file", "args": "x"}}]`, "$[0].args.args"},
		{"edit without a request", `{"type": "edit", "args": null}`, "$.args"},
		{"response not text", `[{"type": "response", "args": {"text": "x"}}]`, "$[0].args"},
		{"approval edit of no call", `{"action": "edit", "value": {"nope": {}}}`, "$.value.nope"},
		{"approval edit not arguments", `{"action": "edit", "value": {"read_file": 3}}`, "$.value.read_file"},
		{"reject with a value", `{"action": "reject", "value": {"messages": []}}`, "$.value"},
		{"unknown action", `{"action": "maybe"}`, "$.action"},
		{"decisions not a list", `{"decisions": {"type": "approve"}}`, "$.decisions"},
		{"too many decisions", `{"decisions": [{"type": "approve"}, {"type": "approve"}]}`, "$.decisions"},
		{"unknown decision", `{"decisions": [{"type": "accept"}]}`, "$.decisions[0].type"},
		{"decision not an object", `{"decisions": ["approve"]}`, "$.decisions[0]"},
		{"edited action of another tool", `{"decisions": [{"type": "edit", "edited_action": {"name": "write_file", "args": {}}}]}`, "$.decisions[0].edited_action.name"},
		{"edited action without arguments", `{"decisions": [{"type": "edit", "edited_action": {"name": "read_file", "args": []}}]}`, "$.decisions[0].edited_action.args"},
		{"edit without an action", `{"decisions": [{"type": "edit"}]}`, "$.decisions[0].edited_action"},
	}
	a := reviewChat(t, "")
	s := inmem.Open(store.Options{})
	head := pauseForReview(t, a, s, "r")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := a.CheckResume(head, json.RawMessage(tc.answer))
			var ce *agentfile.ChatInputError
			if !errors.As(err, &ce) || ce.Path != tc.path {
				t.Fatalf("%v (want path %s)", err, tc.path)
			}
		})
	}
	// The node refuses it too, and the thread stays paused.
	_, err := agentfile.Resume(context.Background(), a, agentfile.RunConfig{Store: s, Thread: "r", Answer: json.RawMessage(`[{"type": "maybe"}]`)})
	if !errors.Is(err, agentfile.ErrChatInput) {
		t.Fatalf("resume with a bad answer: %v", err)
	}
}

// FuzzCheckResume: any resume value either answers the calls under
// review or is refused with a ChatInputError; it never panics.
func FuzzCheckResume(f *testing.F) {
	for _, seed := range []string{`{"type": "accept", "args": null}`, `[{"type": "edit", "args": {"action": "read_file", "args": {"path": "x"}}}]`,
		`[{"type": "response", "args": "no"}]`, `[{"type": "ignore"}]`, `{"action": "edit", "value": {"read_file": {}}}`, `{"action": "reject", "reason": "no"}`,
		`[]`, `null`, `[{"type": "edit", "args": {"action": null, "args": []}}]`, `{"action": "approve", "value": 1}`,
		`{"decisions": [{"type": "approve"}]}`, `{"decisions": [{"type": "edit", "edited_action": {"name": "read_file", "args": {"path": "x"}}}]}`,
		`{"decisions": [{"type": "reject", "message": "no"}]}`, `{"decisions": null}`} {
		f.Add([]byte(seed))
	}
	a := reviewChat(f, "")
	head := pauseForReview(f, a, inmem.Open(store.Options{}), "r")
	f.Fuzz(func(t *testing.T, raw []byte) {
		err := a.CheckResume(head, raw)
		if err != nil && !errors.Is(err, agentfile.ErrChatInput) {
			t.Fatalf("%s: %v", raw, err)
		}
	})
}
