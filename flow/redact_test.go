package flow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/tracefile"
)

// The secrets a run meets; none may reach the store, events, traces or
// returned errors.
var runSecrets = []string{
	"sk-proj-INPUTabcdefghijklmnopqrstu",  // in the input, as a shape
	"hunter2-node-password",               // under a "password" key in an update
	"sk-ant-NODEabcdefghijklmnopqrstu",    // in a node's message content
	"sk-live-ERRORabcdefghijklmnopqrst",   // in a failing node's error
	"interrupt-token-value",               // under "token" in an interrupt payload
	"sk-send-SENDabcdefghijklmnopqrstu",   // in a Send input
	"resume-api-key-value",                // under "apiKey" in the resume value
	"sk-upd-UPDATEabcdefghijklmnopqrstu",  // in an UpdateState update
	"parallel-sibling-secret",             // under "secret" in a pending write
	"eyJhbGciOiJIUzI1NiJ9.bearer-payload", // a Bearer token in a key name
	"annotated-token-value",               // under "token" in a step annotation
	"sk-note-NOTEabcdefghijklmnopqrstu",   // in a step annotation's text
}

func TestRedactBeforeCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "state.db")
	s, err := sqlite.OpenStore(context.Background(), dbPath, sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sch := state.MustSchema(state.WithField("log", state.ReducerAppend), state.WithField("creds", state.ReducerMerge),
		state.WithField("messages", state.ReducerMessages), state.WithField("answer", state.ReducerReplace))
	var boomRuns atomic.Int32
	g := flow.NewGraph(sch).
		AddNode("sibling", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			flow.Annotate(ctx, "audit", struct {
				Token string `json:"token"`
				Note  string `json:"note"`
			}{runSecrets[10], "saw " + runSecrets[11]})
			return state.Update{"creds": map[string]any{"secret": runSecrets[8]}, "log": "sibling"}, nil
		}).
		AddNode("boom", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			if boomRuns.Add(1) == 1 {
				return nil, fmt.Errorf("provider refused key %s: %w", runSecrets[3], errBoom)
			}
			return state.Update{"log": "boom", "messages": []map[string]any{{"role": "ai", "content": "use " + runSecrets[2]}},
				"creds": map[string]any{"password": runSecrets[1], "Authorization: Bearer " + runSecrets[9]: 1}}, nil
		}).
		AddNode("ask", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			var v map[string]string
			if err := flow.Interrupt(ctx, map[string]string{"question": "credentials?", "token": runSecrets[4]}, &v); err != nil {
				return nil, err
			}
			return state.Update{"answer": v}, nil
		}).
		AddNode("worker", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			return state.Update{"log": "worker " + string(flow.Input(ctx))}, nil
		}).
		AddEdge(flow.START, "sibling").AddEdge(flow.START, "boom").
		AddEdge("boom", "ask").
		AddRouter("ask", func(ctx context.Context, _ state.Doc) ([]flow.Target, error) {
			t, err := flow.Send("worker", map[string]string{"note": runSecrets[5]})
			return []flow.Target{t}, err
		})
	var events bytes.Buffer
	r := newRunner(t, g, s, flow.Options{Redact: redact.Default(), Observer: func(e flow.Event) {
		b, _ := json.Marshal(e)
		events.Write(append(b, '\n'))
	}})

	_, err = r.Invoke(ctx, "t", state.Update{"log": "key " + runSecrets[0]})
	if !errors.Is(err, errBoom) || !errors.Is(err, flow.ErrNodeFailed) {
		t.Fatalf("first run: %v, want the node's error", err)
	}
	errText := err.Error()
	res, err := r.Resume(ctx, "t", nil)
	if err != nil || res.StopReason != state.StopInterrupt {
		t.Fatalf("resume: %v %+v", err, res)
	}
	interruptText := string(res.Interrupt)
	res, err = r.Resume(ctx, "t", map[string]string{"apiKey": runSecrets[6], "user": "ann"})
	if err != nil || res.StopReason != state.StopSuccess {
		t.Fatalf("resume with value: %v %+v", err, res)
	}
	if _, err := r.UpdateState(ctx, "t", state.Update{"log": runSecrets[7]}, "worker"); err != nil {
		t.Fatal(err)
	}
	// The state in memory is the state committed.
	head, err := s.Load(ctx, store.LoadRequest{Thread: "t", Seq: res.Head})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal([]byte(head.State.String()), []byte(res.State.String())) {
		t.Fatalf("in-memory state differs from the stored one:\n%s\n%s", []byte(res.State.String()), []byte(head.State.String()))
	}
	if !strings.Contains(string([]byte(head.State.String())), `"user":"ann"`) || !strings.Contains(string([]byte(head.State.String())), redact.Replacement) {
		t.Fatalf("state lost clean data or was not redacted: %s", []byte(head.State.String()))
	}
	failedCP, err := s.Load(ctx, store.LoadRequest{Thread: "t", Seq: 2})
	if err != nil {
		t.Fatal(err)
	}
	if audit, _ := json.Marshal(failedCP.Meta.Extra["audit"]); failedCP.Status != store.StatusFailed || !strings.Contains(string(audit), `"token":"[REDACTED]"`) {
		t.Fatalf("annotation of the failed step: %s %s", failedCP.Status, audit)
	}
	if boomRuns.Load() != 2 {
		t.Fatalf("boom ran %d times", boomRuns.Load())
	}

	traceDir := filepath.Join(dir, "trace")
	if _, err := tracefile.Export(ctx, s, "t", traceDir); err != nil {
		t.Fatal(err)
	}
	// The database while open (WAL included), then after close.
	var open bytes.Buffer
	for _, p := range []string{dbPath, dbPath + "-wal"} {
		b, _ := os.ReadFile(p)
		open.Write(b)
	}
	if open.Len() == 0 {
		t.Fatal("read nothing from the database")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sources := map[string][]byte{"database (open)": open.Bytes(), "events": events.Bytes(),
		"returned error": []byte(errText), "interrupt": []byte(interruptText)}
	for _, p := range []string{dbPath, dbPath + "-wal", filepath.Join(traceDir, "manifest.json"), filepath.Join(traceDir, "events.jsonl"), filepath.Join(traceDir, "steps.jsonl")} {
		b, _ := os.ReadFile(p)
		sources[filepath.Base(p)] = b
	}
	if !bytes.Contains(events.Bytes(), []byte(redact.Replacement)) {
		t.Fatal("events carry no redacted values; the test saw nothing")
	}
	for name, b := range sources {
		for _, sec := range runSecrets {
			if bytes.Contains(b, []byte(sec)) {
				t.Errorf("%s holds secret %q", name, sec)
			}
		}
	}
}

var errBoom = errors.New("boom")

// TestRedactApprovalValue: the value of an approval (an edit, or a
// rejection's update, at a pause before a step) is redacted before the
// state it changes is stored.
func TestRedactApprovalValue(t *testing.T) {
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "state.db")
	s, err := sqlite.OpenStore(context.Background(), dbPath, sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sch := state.MustSchema(state.WithField("log", state.ReducerAppend), state.WithField("creds", state.ReducerMerge))
	g := flow.NewGraph(sch).
		AddNode("work", func(ctx context.Context, _ state.Doc) (state.Update, error) {
			return state.Update{"log": "worked"}, nil
		}).
		AddEdge(flow.START, "work")
	r := newRunner(t, g, s, flow.Options{Redact: redact.Default(), InterruptBefore: []string{"work"}})
	secrets := map[string]string{"edit": "sk-proj-EDITabcdefghijklmnopqrstu", "reject": "sk-proj-REJECTabcdefghijklmnopqr"}
	for _, action := range []string{flow.ApprovalEdit, flow.ApprovalReject} {
		thread := "t-" + action
		if res, err := r.Invoke(ctx, thread, state.Update{"log": "start"}); err != nil || res.StopReason != state.StopInterrupt {
			t.Fatalf("%s: invoke: %v %+v", action, err, res)
		}
		val := fmt.Sprintf(`{"log": "key %s", "creds": {"password": "hunter2-approval-pw"}}`, secrets[action])
		res, err := r.Resume(ctx, thread, flow.Approval{Action: action, Value: json.RawMessage(val), Reason: "ok", By: "ann"})
		if err != nil {
			t.Fatalf("%s: resume: %v", action, err)
		}
		if st := res.State.String(); !strings.Contains(st, "key "+redact.Replacement) || strings.Contains(st, "hunter2") {
			t.Fatalf("%s: the state in memory is not redacted: %s", action, st)
		}
	}
	var b []byte
	for _, p := range []string{dbPath, dbPath + "-wal"} {
		raw, _ := os.ReadFile(p)
		b = append(b, raw...)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dbPath, dbPath + "-wal"} {
		raw, _ := os.ReadFile(p)
		b = append(b, raw...)
	}
	for _, sec := range []string{secrets["edit"], secrets["reject"], "hunter2-approval-pw"} {
		if bytes.Contains(b, []byte(sec)) {
			t.Errorf("the database holds %q", sec)
		}
	}
}
