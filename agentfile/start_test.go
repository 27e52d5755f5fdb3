package agentfile_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestCheckStart: the one rule of whether a run may start on a thread,
// case by case.
func TestCheckStart(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	t.Cleanup(func() { _ = s.Close() })
	doc := state.Doc{}
	mk := func(id string, md map[string]any, statuses map[string]store.Status) {
		if _, err := s.CreateThread(ctx, store.Thread{ID: id, Metadata: md}); err != nil {
			t.Fatal(err)
		}
		for ns, st := range statuses {
			if _, err := s.Append(ctx, store.Checkpoint{Thread: id, Namespace: ns, State: doc, Status: st}); err != nil {
				t.Fatal(err)
			}
		}
	}
	file := map[string]any{agentfile.MetaKind: "agent", agentfile.MetaFile: "/a.md"}
	mk("done", file, map[string]store.Status{"": store.StatusSuccess})
	mk("paused", file, map[string]store.Status{"": store.StatusInterrupted})
	mk("sub", file, map[string]store.Status{"": store.StatusSuccess, "child": store.StatusFailed})
	mk("graph", nil, map[string]store.Status{"": store.StatusSuccess})
	mk("empty", file, nil)
	agent := agentfile.StartRequest{Kind: "agent", File: "/a.md"}
	with := func(thread string, f func(*agentfile.StartRequest)) agentfile.StartRequest {
		q := agent
		q.Thread = thread
		if f != nil {
			f(&q)
		}
		return q
	}
	tests := []struct {
		name string
		q    agentfile.StartRequest
		want error
	}{
		{"a missing thread is free", with("none", nil), nil},
		{"a finished thread of the file", with("done", nil), nil},
		{"a thread created but never run", with("empty", nil), nil},
		{"another file's thread", with("done", func(q *agentfile.StartRequest) { q.File = "/b.md" }), agentfile.ErrOtherFile},
		{"another kind on the file's thread", with("done", func(q *agentfile.StartRequest) { q.Kind = agentfile.KindPipeline }), agentfile.ErrOtherFile},
		{"a thread of no file, not adopted", with("graph", nil), agentfile.ErrOtherFile},
		{"a thread of no file, adopted", with("graph", func(q *agentfile.StartRequest) { q.Adopt = true }), nil},
		{"an unfinished run", with("paused", nil), agentfile.ErrUnfinished},
		{"an unfinished run, continued", with("paused", func(q *agentfile.StartRequest) { q.Continue = true }), nil},
		{"an unfinished run, abandoned", with("paused", func(q *agentfile.StartRequest) { q.Abandon = true }), nil},
		{"an unfinished run, a chat's new message", with("paused", func(q *agentfile.StartRequest) { q.Kind = agentfile.KindChat; q.File = "" }), nil},
		{"an unfinished subgraph, root only", with("sub", nil), nil},
		{"an unfinished subgraph, every namespace", with("sub", func(q *agentfile.StartRequest) { q.Namespaces = true }), agentfile.ErrUnfinished},
		{"no file bound (a file's own run)", with("paused", func(q *agentfile.StartRequest) { q.File, q.Kind = "", "" }), agentfile.ErrUnfinished},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := agentfile.CheckStart(ctx, s, tc.q)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if _, ok := errors.AsType[*agentfile.StartError](err); tc.want != nil && !ok {
				t.Fatalf("err = %T, want *StartError", err)
			}
			if tc.want == nil && tc.q.Thread != "none" && st.Thread.ID != tc.q.Thread {
				t.Fatalf("start = %+v: the thread it read is missing", st)
			}
		})
	}
}
