package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

func testAppendAndLoad(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "t1")
	for i := 1; i <= 30; i++ {
		m.step(i)
	}
	m.checkLoad(0)
	for seq := int64(1); seq <= 30; seq++ {
		m.checkLoad(seq)
	}
	cp, err := s.Load(ctx, store.LoadRequest{Thread: "t1", Seq: 7})
	if err != nil {
		t.Fatal(err)
	}
	if cp.Seq != 7 || cp.Parent != 6 || cp.Status != store.StatusSuccess || cp.Nodes[0] != "step" || cp.Meta.Source != "step" {
		t.Fatalf("checkpoint 7 = %+v", cp)
	}
	if len(cp.Patch) == 0 {
		t.Fatal("loaded checkpoint has no patch")
	}
	th, err := s.Thread(ctx, "t1")
	if err != nil || th.Head != 30 {
		t.Fatalf("thread = %+v, %v", th, err)
	}
	if _, err := s.Load(ctx, store.LoadRequest{Thread: "t1", Seq: 31}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load past head: %v", err)
	}
	if _, err := s.Load(ctx, store.LoadRequest{Thread: "nope"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load unknown thread: %v", err)
	}
	if _, err := s.Thread(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown thread: %v", err)
	}
	// Statuses and metadata survive.
	score := 0.75
	doc, patch, _ := schema.Apply(m.doc, state.Update{"count": -1})
	failed, err := s.Append(ctx, store.Checkpoint{Thread: "t1", Parent: 30, Status: store.StatusFailed, Patch: patch, State: doc,
		Meta: store.Meta{Error: "boom", Score: &score, Tokens: &store.Tokens{Input: 3, Output: 4}, Interrupt: json.RawMessage(`{"ask":"why"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx, store.LoadRequest{Thread: "t1", Seq: failed.Seq})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusFailed || got.Meta.Error != "boom" || *got.Meta.Score != 0.75 || got.Meta.Tokens.Output != 4 || string(got.Meta.Interrupt) != `{"ask":"why"}` {
		t.Fatalf("failed checkpoint = %+v", got)
	}
}

func testStaleHead(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "stale")
	for i := 1; i <= 5; i++ {
		m.step(i)
	}
	for _, parent := range []int64{0, 3, 4, 9} {
		_, err := s.Append(ctx, store.Checkpoint{Thread: "stale", Parent: parent, State: m.doc})
		if parent == 9 {
			if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("parent %d: err = %v", parent, err)
			}
			continue
		}
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("parent %d: err = %v, want ErrConflict", parent, err)
		}
	}
	th, err := s.Thread(ctx, "stale")
	if err != nil || th.Head != 5 {
		t.Fatalf("head after conflicts = %d, %v", th.Head, err)
	}
	m.checkLoad(0)
}

func testConcurrentAppenders(t *testing.T, h Harness) {
	for _, writers := range []int{2, 8} {
		t.Run(fmt.Sprintf("writers=%d", writers), func(t *testing.T) {
			ctx := context.Background()
			s := open(t, h)
			thread := fmt.Sprintf("race-%d", writers)
			m := newModel(t, s, thread)
			m.step(1)
			const rounds = 25
			for r := 0; r < rounds; r++ {
				head := m.head
				var wg sync.WaitGroup
				var mu sync.Mutex
				wins, conflicts := 0, 0
				var winner state.Doc
				for w := 0; w < writers; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						doc, patch, err := schema.Apply(m.doc, state.Update{"count": w})
						if err != nil {
							t.Error(err)
							return
						}
						_, err = s.Append(ctx, store.Checkpoint{Thread: thread, Parent: head, Patch: patch, State: doc})
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err == nil:
							wins++
							winner = doc
						case errors.Is(err, store.ErrConflict):
							conflicts++
						default:
							t.Errorf("writer %d: %v", w, err)
						}
					}()
				}
				wg.Wait()
				if wins != 1 || conflicts != writers-1 {
					t.Fatalf("round %d: %d wins, %d conflicts", r, wins, conflicts)
				}
				m.head++
				m.doc = winner
				m.want[m.head] = winner.String()
			}
			th, err := s.Thread(ctx, thread)
			if err != nil || th.Head != rounds+1 {
				t.Fatalf("head = %d, %v", th.Head, err)
			}
			n := 0
			for cp, err := range s.History(ctx, store.HistoryRequest{Thread: thread, WithState: true}) {
				if err != nil {
					t.Fatal(err)
				}
				if cp.Parent != cp.Seq-1 {
					t.Fatalf("forked history: seq %d parent %d", cp.Seq, cp.Parent)
				}
				if cp.State.String() != m.want[cp.Seq] {
					t.Fatalf("seq %d state %s, want %s", cp.Seq, cp.State, m.want[cp.Seq])
				}
				n++
			}
			if n != rounds+1 {
				t.Fatalf("history has %d checkpoints", n)
			}
		})
	}
}

func testPendingWrites(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "pw")
	m.step(1)
	ws := []store.Write{{Task: "b:1", Node: "b", Update: json.RawMessage(`{"count":2}`)}, {Task: "a:0", Node: "a", Update: json.RawMessage(`{"kv":{"x":1}}`)}}
	if err := s.PutWrites(ctx, "pw", "", 1, ws); err != nil {
		t.Fatal(err)
	}
	if err := s.PutWrites(ctx, "pw", "", 1, []store.Write{{Task: "b:1", Node: "b", Update: json.RawMessage(`{"count":3}`)}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Writes(ctx, "pw", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Task != "a:0" || string(got[1].Update) != `{"count":3}` {
		t.Fatalf("writes = %+v", got)
	}
	if got, _ := s.Writes(ctx, "pw", "", 2); len(got) != 0 {
		t.Fatalf("writes of another step: %+v", got)
	}
	if err := s.PutWrites(ctx, "pw", "", 1, []store.Write{{Task: "", Update: json.RawMessage(`{}`)}}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("bad write: %v", err)
	}
	if err := s.PutWrites(ctx, "pw", "", 1, []store.Write{{Task: "x", Update: json.RawMessage(`{`)}}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("bad write JSON: %v", err)
	}
}

func testInvalidInput(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	for _, id := range []string{"", "-x", "a b", "a/", "/b", "a/b/c", "a/-x", "é", strings.Repeat("a", 129), "x;drop"} {
		if _, err := s.Append(ctx, store.Checkpoint{Thread: id}); !errors.Is(err, store.ErrInvalidID) {
			t.Errorf("thread id %q: %v", id, err)
		}
		if _, err := s.Load(ctx, store.LoadRequest{Thread: id}); !errors.Is(err, store.ErrInvalidID) {
			t.Errorf("load %q: %v", id, err)
		}
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "ok", Namespace: "/bad"}); !errors.Is(err, store.ErrInvalidID) {
		t.Errorf("namespace: %v", err)
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "ok", Status: 99}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("status: %v", err)
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "ok", Parent: -1}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("parent: %v", err)
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "ok", Meta: store.Meta{Extra: map[string]any{"c": make(chan int)}}}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("meta: %v", err)
	}
	if _, err := s.Thread(ctx, "ok"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("failed appends created a thread: %v", err)
	}
}

// testAppendCarriesWrites: pending writes an append carries
// (Checkpoint.Writes) are stored with it, at the checkpoint they name;
// an append refused (a stale parent) or invalid stores none of them.
func testAppendCarriesWrites(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "cw")
	m.step(1)
	m.step(2)
	head, err := s.Load(ctx, store.LoadRequest{Thread: "cw"})
	if err != nil {
		t.Fatal(err)
	}
	call := store.Write{Task: "journal/2/cw/2/step/call/0", Node: "step", Update: json.RawMessage(`{"kind":"model"}`)}
	next := store.Checkpoint{Thread: "cw", Parent: 2, Nodes: []string{"step"}, State: head.State, Writes: []store.Write{call}, WritesAt: 2}
	if _, err := s.Append(ctx, next); err != nil {
		t.Fatal(err)
	}
	got, err := s.Writes(ctx, "cw", "", 2)
	if err != nil || len(got) != 1 || got[0].Task != call.Task || string(got[0].Update) != `{"kind":"model"}` {
		t.Fatalf("writes at 2 = %+v, %v", got, err)
	}
	stale := next
	stale.Writes = []store.Write{{Task: "journal/2/cw/2/step/call/1", Node: "step", Update: json.RawMessage(`{}`)}}
	if _, err := s.Append(ctx, stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("an append on a stale parent: %v", err)
	}
	for _, bad := range []store.Checkpoint{
		{Thread: "cw", Parent: 3, State: head.State, Writes: []store.Write{{Task: "x", Update: json.RawMessage(`{`)}}, WritesAt: 3},
		{Thread: "cw", Parent: 3, State: head.State, Writes: []store.Write{{Task: "x", Update: json.RawMessage(`{}`)}}, WritesAt: 4},
	} {
		if _, err := s.Append(ctx, bad); !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("an append with bad writes: %v", err)
		}
	}
	if got, _ := s.Writes(ctx, "cw", "", 2); len(got) != 1 {
		t.Fatalf("a refused append left writes: %+v", got)
	}
	if got, _ := s.Writes(ctx, "cw", "", 3); len(got) != 0 {
		t.Fatalf("an invalid append left writes: %+v", got)
	}
	if th, _ := s.Thread(ctx, "cw"); th.Head != 3 {
		t.Fatalf("head %d after the refusals, want 3", th.Head)
	}
}
