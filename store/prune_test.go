package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/inmem"
)

// failingAttach fails every late snapshot: the rows that name one replay
// from the snapshot below it, as after a process that stopped first.
type failingAttach struct{ *inmem.Backend }

func (failingAttach) AttachSnapshot(context.Context, driver.Row, uint32) (bool, error) {
	return false, errors.New("disk full")
}

// tree is a thread "r" written by random appends, forks and pauses, with
// what each checkpoint is.
type tree struct {
	s      store.Store
	head   int64
	docs   map[int64]state.Doc
	parent map[int64]int64
	status map[int64]store.Status
	stepOf map[int64]int64
}

func (tr *tree) add(cp store.Checkpoint, doc state.Doc) {
	tr.docs[cp.Seq], tr.parent[cp.Seq], tr.status[cp.Seq] = doc, cp.Parent, cp.Status
	tr.stepOf[cp.Seq] = cp.Meta.StepOf
	tr.head = max(tr.head, cp.Seq)
}

// step writes one checkpoint: mostly a step on the head, now and then a
// fork of an earlier checkpoint or a pause on the head.
func (tr *tree) step(t *testing.T, rng *rand.Rand, i int) {
	t.Helper()
	ctx := context.Background()
	doc, patch, err := state.MustSchema().Apply(tr.docs[tr.head], state.Update{"n": i, "text": fmt.Sprintf("step %d %090d", i, rng.Int64())})
	if err != nil {
		t.Fatal(err)
	}
	switch op := rng.IntN(10); {
	case op == 0 && tr.status[tr.head] == store.StatusSuccess:
		cp, err := tr.s.Append(ctx, store.Checkpoint{Thread: "r", Parent: tr.head, State: tr.docs[tr.head], Status: store.StatusInterrupted, Meta: store.Meta{StepOf: tr.head}})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.s.PutWrites(ctx, "r", "", tr.head, []store.Write{{Task: fmt.Sprint("t", i), Node: "n", Update: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		tr.add(cp, tr.docs[tr.head])
	case op <= 2 && tr.head > 1:
		var seqs []int64
		for seq := range tr.status {
			seqs = append(seqs, seq)
		}
		slices.Sort(seqs)
		at := seqs[rng.IntN(len(seqs))]
		if tr.status[at] != store.StatusSuccess {
			return
		}
		if doc, patch, err = state.MustSchema().Apply(tr.docs[at], state.Update{"n": i, "forked": at}); err != nil {
			t.Fatal(err)
		}
		cp, err := tr.s.Fork(ctx, store.ForkRequest{Thread: "r", At: at, Patch: patch})
		if err != nil {
			t.Fatal(err)
		}
		tr.add(cp, doc)
	default:
		cp, err := tr.s.Append(ctx, store.Checkpoint{Thread: "r", Parent: tr.head, Patch: patch, State: doc})
		if err != nil {
			t.Fatal(err)
		}
		tr.add(cp, doc)
	}
}

// kept is what keep-last keep leaves, worked out from the tree: the newest
// keep checkpoints back from each tip, and the checkpoint each kept pause
// resumes from.
func (tr *tree) kept(keep int) []int64 {
	built := map[int64]bool{}
	for _, p := range tr.parent {
		built[p] = true
	}
	in := map[int64]bool{}
	for seq := range tr.docs {
		for k, at := 0, seq; k < keep && at != 0 && !built[seq]; k++ {
			in[at], at = true, tr.parent[at]
		}
	}
	for seq := range in {
		if tr.status[seq] == store.StatusInterrupted {
			in[tr.stepOf[seq]] = true
		}
	}
	var out []int64
	for seq := range in {
		out = append(out, seq)
	}
	slices.Sort(out)
	return out
}

// forget drops what a prune deleted: every checkpoint but kept.
func (tr *tree) forget(kept []int64) {
	for seq := range tr.status {
		if !slices.Contains(kept, seq) {
			delete(tr.docs, seq)
			delete(tr.status, seq)
		}
	}
}

// check rebuilds every checkpoint left, by a history walk and one by one,
// and returns their seqs.
func (tr *tree) check(t *testing.T) []int64 {
	t.Helper()
	ctx := context.Background()
	var left []int64
	for cp, err := range tr.s.History(ctx, store.HistoryRequest{Thread: "r", WithState: true}) {
		if err != nil {
			t.Fatalf("history: %v", err)
		}
		if cp.State.String() != tr.docs[cp.Seq].String() {
			t.Fatalf("checkpoint %d in the history: %.60s, want %.60s", cp.Seq, cp.State.String(), tr.docs[cp.Seq].String())
		}
		left = append(left, cp.Seq)
	}
	for _, seq := range left {
		if cp, err := tr.s.Load(ctx, store.LoadRequest{Thread: "r", Seq: seq}); err != nil || cp.State.String() != tr.docs[seq].String() {
			t.Fatalf("load %d: %v", seq, err)
		}
	}
	slices.Sort(left)
	return left
}

// TestPruneKeepsExactlyN: on random trees of checkpoints (steps, forks of
// earlier checkpoints, pauses with pending writes), with late snapshots
// written or failing, keep-last N leaves exactly the newest N of each
// branch and what a kept pause resumes from; every checkpoint left
// rebuilds, with the pending writes of each kept one; the thread goes on
// — on a head this engine holds as it committed it before the prune — and
// a second prune of the longer thread leaves every checkpoint rebuildable.
func TestPruneKeepsExactlyN(t *testing.T) {
	for seed := range 24 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(seed), 28))
			var b driver.Backend = inmem.New()
			if seed%2 == 1 {
				b = failingAttach{inmem.New()}
			}
			s := store.New(b, store.Options{MinSnapshotBytes: 300})
			defer s.Close()
			tr := &tree{s: s, docs: map[int64]state.Doc{0: state.EmptyDoc()}, parent: map[int64]int64{}, status: map[int64]store.Status{}, stepOf: map[int64]int64{}}
			for i := range 40 + rng.IntN(40) {
				tr.step(t, rng, i)
			}
			keep := 1 + rng.IntN(4)
			want := tr.kept(keep)
			if _, err := s.Prune(ctx, store.PruneRequest{Thread: "r", KeepLast: keep}); err != nil {
				t.Fatal(err)
			}
			if left := tr.check(t); !slices.Equal(left, want) {
				t.Fatalf("keep-last %d left %v, want %v", keep, left, want)
			}
			tr.forget(want)
			for seq := range tr.status {
				// A pause's writes are on the checkpoint its step read.
				if from := tr.stepOf[seq]; from != 0 {
					if ws, err := s.Writes(ctx, "r", "", from); err != nil || len(ws) == 0 {
						t.Fatalf("pending writes of %d, which pause %d resumes from: %v %v", from, seq, ws, err)
					}
				}
			}
			for i := range 10 {
				tr.step(t, rng, 1000+i)
			}
			tr.check(t)
			if _, err := s.Prune(ctx, store.PruneRequest{Thread: "r", KeepLast: keep}); err != nil {
				t.Fatal(err)
			}
			tr.check(t)
		})
	}
}
