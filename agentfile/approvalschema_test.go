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

// approvalFile is a chain that drafts and pauses before it sends, its
// approval spelled approval (the front matter's line 6).
func approvalFile(approval string) string {
	return "---\nname: x\nmodel: {provider: scripted, script: replies.yaml}\nchain: [{id: draft, kind: text}, {id: send, kind: text}]\ninterrupt_before: [send]\n" + approval +
		"schemas:\n  Edit: {type: object, required: [note], properties: {note: {type: string}}}\n  Bad: {type: nope}\n---\n## step:draft\nDraft.\n## step:send\nSend.\n"
}

// TestApprovalResponseSchema: approval.response_schema names a schema of
// schemas: or is one inline; a bad one is an error naming the file and
// line when the file loads; the pause carries it and refuses an edit
// that does not fit.
func TestApprovalResponseSchema(t *testing.T) {
	for _, tc := range []struct {
		name, approval, want string
	}{
		{name: "named", approval: "approval: {response_schema: Edit}\n"},
		{name: "inline", approval: "approval: {response_schema: {type: object, required: [note]}}\n"},
		{name: "unknown name", approval: "approval: {response_schema: Nope}\n", want: `demo.md:6: approval.response_schema: unknown schema "Nope"`},
		{name: "bad named", approval: "approval: {response_schema: Bad}\n", want: "demo.md:9: approval.response_schema: flow: invalid response schema"},
		{name: "bad inline", approval: "approval: {response_schema: {type: 3}}\n", want: "demo.md:6: approval.response_schema: flow: invalid response schema"},
		{name: "a list", approval: "approval: {response_schema: [a]}\n", want: "demo.md:6: approval.response_schema: flow: invalid response schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agentfile.Parse("demo.md", []byte(approvalFile(tc.approval)))
			if tc.want != "" {
				if !errors.Is(err, agentfile.ErrInvalidFile) || !strings.Contains(fmtErr(err), tc.want) {
					t.Fatalf("error %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	src := strings.Replace(approvalFile("approval: {response_schema: Edit}\n"), "interrupt_before: [send]\n", "", 1)
	if _, err := agentfile.Parse("demo.md", []byte(src)); err == nil || !strings.Contains(err.Error(), "needs interrupt_before") {
		t.Fatalf("without a pause: %v", err)
	}
	runApprovalSchema(t)
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// runApprovalSchema runs the named-schema file to its pause, which
// carries the schema, and resumes it with an edit that does not fit
// (refused, nothing committed) and one that does.
func runApprovalSchema(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "demo.md")
	src := strings.Replace(approvalFile("approval: {response_schema: Edit}\n"), "  Bad: {type: nope}\n", "", 1)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "replies.yaml"), []byte("replies:\n  - {step: draft, text: d}\n  - {step: send, text: s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := agentfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	cfg := agentfile.RunConfig{Store: s, Thread: "t", Input: agentfile.Input{Source: "inline", Kind: "text", Content: json.RawMessage(`"go"`)}}
	if res, err := agentfile.Run(ctx, a, cfg); err != nil || res.Result.StopReason != state.StopInterrupt {
		t.Fatalf("run: %v", err)
	}
	head, _ := s.Load(ctx, store.LoadRequest{Thread: "t"})
	if !strings.Contains(string(flow.ResponseSchemaOf(head)), `"note"`) {
		t.Fatalf("pause %s", head.Meta.Interrupt)
	}
	cfg.Answer = flow.Approval{Action: "edit", Value: json.RawMessage(`{"note": 1}`)}
	if _, err := agentfile.Resume(ctx, a, cfg); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("a bad edit: %v", err)
	}
	if after, _ := s.Load(ctx, store.LoadRequest{Thread: "t"}); after.Seq != head.Seq {
		t.Fatal("a refused edit moved the thread")
	}
	cfg.Answer = flow.Approval{Action: "approve"}
	if res, err := agentfile.Resume(ctx, a, cfg); err != nil || res.Result.StopReason != state.StopSuccess {
		t.Fatalf("approve: %v", err)
	}
}
