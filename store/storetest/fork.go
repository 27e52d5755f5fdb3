package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// testForkInto checks what a fork into a new thread carries: the source
// thread's tenant and metadata (or the request's), and the schedule of the
// checkpoint it branches from when the request gives none.
func testForkInto(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	meta := map[string]any{"file": "agent.md", "kind": "agent"}
	if _, err := s.CreateThread(ctx, store.Thread{ID: "src", Tenant: "acme", Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	m := newModel(t, s, "src")
	for i := 1; i <= 6; i++ {
		m.step(i)
	}
	// Checkpoint 7 schedules a fan-out with inputs.
	doc, patch, err := schema.Apply(m.doc, state.Update{"count": 70})
	if err != nil {
		t.Fatal(err)
	}
	tasks := []store.Task{{Node: "a", Input: []byte(`{"x":1}`)}, {Node: "b"}}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "src", Parent: 6, Patch: patch, State: doc, Meta: store.Meta{Next: []string{"a", "b"}, Tasks: tasks}}); err != nil {
		t.Fatal(err)
	}
	m.head, m.doc, m.want[7] = 7, doc, doc.String()
	tests := []struct {
		name     string
		req      store.ForkRequest
		tenant   string
		metadata map[string]any
		next     []string
		tasks    int
	}{
		{"inherits", store.ForkRequest{At: 3, Into: "f-inherit"}, "acme", meta, []string{"step"}, 0},
		{"carries tasks", store.ForkRequest{At: 7, Into: "f-tasks"}, "acme", meta, []string{"a", "b"}, 2},
		{"new metadata", store.ForkRequest{At: 3, Into: "f-meta", Metadata: map[string]any{"file": "other.md"}}, "acme", map[string]any{"file": "other.md"}, []string{"step"}, 0},
		{"no metadata", store.ForkRequest{At: 3, Into: "f-empty", Metadata: map[string]any{}}, "acme", nil, []string{"step"}, 0},
		{"own schedule", store.ForkRequest{At: 7, Into: "f-own", Meta: store.Meta{Next: []string{"z"}}}, "acme", meta, []string{"z"}, 0},
		{"branch carries schedule", store.ForkRequest{At: 7}, "", nil, []string{"a", "b"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Thread = "src"
			fk, err := s.Fork(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(fk.Meta.Next) != fmt.Sprint(tc.next) || len(fk.Meta.Tasks) != tc.tasks {
				t.Fatalf("fork schedule: next %v tasks %v", fk.Meta.Next, fk.Meta.Tasks)
			}
			got, err := s.Load(ctx, store.LoadRequest{Thread: fk.Thread, Seq: fk.Seq})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.Meta.Next) != fmt.Sprint(tc.next) || len(got.Meta.Tasks) != tc.tasks || got.State.String() != m.want[tc.req.At] {
				t.Fatalf("loaded fork: next %v tasks %v state %s", got.Meta.Next, got.Meta.Tasks, got.State)
			}
			if tc.tasks > 0 && string(got.Meta.Tasks[0].Input) != `{"x":1}` {
				t.Fatalf("task input %s", got.Meta.Tasks[0].Input)
			}
			if tc.req.Into == "" {
				return
			}
			th, err := s.Thread(ctx, tc.req.Into)
			if err != nil {
				t.Fatal(err)
			}
			if th.Tenant != tc.tenant || fmt.Sprint(th.Metadata) != fmt.Sprint(tc.metadata) || th.Head != 1 {
				t.Fatalf("forked thread = %+v", th)
			}
		})
	}
}

// testForkRefused checks forks that must write nothing: from a FAILED or
// INTERRUPTED checkpoint (the error names the seq to fork from), into an
// existing thread, from a missing checkpoint.
func testForkRefused(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "refuse")
	for i := 1; i <= 4; i++ {
		m.step(i)
	}
	doc, patch, _ := schema.Apply(m.doc, state.Update{"count": -1})
	for i, st := range []store.Status{store.StatusFailed, store.StatusInterrupted} {
		parent := int64(4 + i)
		cp, err := s.Append(ctx, store.Checkpoint{Thread: "refuse", Parent: parent, Status: st, Patch: patch, State: doc, Meta: store.Meta{StepOf: parent, Error: "boom"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, into := range []string{"", "refuse-copy"} {
			_, err := s.Fork(ctx, store.ForkRequest{Thread: "refuse", At: cp.Seq, Into: into})
			if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), fmt.Sprintf("(%d)", parent)) {
				t.Fatalf("fork from %s %d into %q: %v; want ErrInvalidArgument naming %d", st, cp.Seq, into, err, parent)
			}
		}
		doc, patch, _ = schema.Apply(doc, state.Update{"count": -2})
	}
	if _, err := s.CreateThread(ctx, store.Thread{ID: "taken", Metadata: map[string]any{"mine": true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fork(ctx, store.ForkRequest{Thread: "refuse", At: 2, Into: "taken"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("fork into an existing thread: %v", err)
	}
	if th, err := s.Thread(ctx, "taken"); err != nil || th.Head != 0 || th.Metadata["mine"] != true {
		t.Fatalf("existing thread changed: %+v, %v", th, err)
	}
	if _, err := s.Fork(ctx, store.ForkRequest{Thread: "refuse", At: 99, Into: "ghost"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("fork at a missing seq: %v", err)
	}
	if _, err := s.Thread(ctx, "refuse-copy"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused fork left thread refuse-copy: %v", err)
	}
	if _, err := s.Thread(ctx, "ghost"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused fork left thread ghost: %v", err)
	}
	if th, _ := s.Thread(ctx, "refuse"); th.Head != 6 {
		t.Fatalf("refused forks moved the head to %d", th.Head)
	}
}

// testNamespaceList checks Store.Namespaces: every namespace with its head,
// count and time, the root first; counts drop with pruning.
func testNamespaceList(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	before := time.Now().Add(-time.Second)
	root := newModel(t, s, "nsl")
	gate := newModel(t, s, "nsl")
	gate.ns = "gate:2"
	sub := newModel(t, s, "nsl")
	sub.ns = "policy|sub"
	for i := 1; i <= 120; i++ {
		root.step(i)
		if i%3 == 0 {
			gate.step(100 + i)
		}
		if i%4 == 0 {
			sub.step(200 + i)
		}
	}
	got, err := s.Namespaces(ctx, "nsl")
	if err != nil {
		t.Fatal(err)
	}
	want := []store.NamespaceInfo{{Name: "", Head: 120, Checkpoints: 120}, {Name: "gate:2", Head: 40, Checkpoints: 40}, {Name: "policy|sub", Head: 30, Checkpoints: 30}}
	if len(got) != len(want) {
		t.Fatalf("namespaces = %+v", got)
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name || g.Head != w.Head || g.Checkpoints != w.Checkpoints || g.UpdatedAt.Before(before) || g.UpdatedAt.After(time.Now().Add(time.Second)) {
			t.Fatalf("namespace %d = %+v, want %+v", i, g, w)
		}
	}
	head, err := s.Load(ctx, store.LoadRequest{Thread: "nsl", Namespace: "gate:2"})
	if err != nil || !head.CreatedAt.Equal(got[1].UpdatedAt) {
		t.Fatalf("gate head time %v, namespace says %v (%v)", head.CreatedAt, got[1].UpdatedAt, err)
	}
	if _, err := s.Prune(ctx, store.PruneRequest{Thread: "nsl", KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Namespaces(ctx, "nsl")
	if err != nil || len(got) != 3 || got[0].Head != 120 || got[0].Checkpoints >= 120 || got[0].Checkpoints < 1 {
		t.Fatalf("after prune: %+v, %v", got, err)
	}
	if _, err := s.CreateThread(ctx, store.Thread{ID: "nsl-empty"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Namespaces(ctx, "nsl-empty"); err != nil || len(got) != 0 {
		t.Fatalf("empty thread: %+v, %v", got, err)
	}
	if _, err := s.Namespaces(ctx, "nsl-missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing thread: %v", err)
	}
	if _, err := s.Namespaces(ctx, "bad id"); !errors.Is(err, store.ErrInvalidID) {
		t.Fatalf("invalid id: %v", err)
	}
}
