package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// marker returns a random string that no stored byte holds by chance.
func marker(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b[:])
}

// dataThread is the thread testPruneDeletesOldData prunes: a main line
// 1..4 whose first checkpoint holds a secret the second replaces, a branch
// forked at 2 (5) paused for an answer at 6 (its step read 5, whose
// pending writes hold the tasks it finished).
type dataThread struct {
	s      store.Store
	id     string
	docs   map[int64]state.Doc
	secret string // in checkpoint 1 only
	note   string // in checkpoints 3 and 4
}

func (d *dataThread) append(t *testing.T, parent int64, upd state.Update, st store.Status, meta store.Meta) int64 {
	t.Helper()
	doc, patch, err := state.MustSchema().Apply(d.docs[parent], upd)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := d.s.Append(context.Background(), store.Checkpoint{Thread: d.id, Parent: parent, Patch: patch, State: doc, Status: st, Meta: meta})
	if err != nil {
		t.Fatalf("append on %d: %v", parent, err)
	}
	d.docs[cp.Seq] = doc
	return cp.Seq
}

func newDataThread(t *testing.T, s store.Store) *dataThread {
	t.Helper()
	ctx := context.Background()
	d := &dataThread{s: s, id: "old-data", docs: map[int64]state.Doc{0: state.EmptyDoc()}, secret: marker("secret-"), note: marker("note-")}
	d.append(t, 0, state.Update{"secret": d.secret, "n": 1}, 0, store.Meta{})
	d.append(t, 1, state.Update{"secret": "replaced", "n": 2}, 0, store.Meta{})
	d.append(t, 2, state.Update{"n": 3, "note": d.note}, 0, store.Meta{})
	d.append(t, 3, state.Update{"n": 4}, 0, store.Meta{})
	fk, err := s.Fork(ctx, store.ForkRequest{Thread: d.id, At: 2})
	if err != nil || fk.Seq != 5 {
		t.Fatalf("fork at 2: %d, %v", fk.Seq, err)
	}
	d.docs[5] = d.docs[2]
	if err := s.PutWrites(ctx, d.id, "", 5, []store.Write{{Task: "lookup", Node: "tool", Update: json.RawMessage(`{"found":true}`)}}); err != nil {
		t.Fatal(err)
	}
	d.append(t, 5, state.Update{}, store.StatusInterrupted, store.Meta{Source: "interrupt", StepOf: 5, Next: []string{"tool", "send"}, Interrupt: json.RawMessage(`{"node":"send"}`)})
	return d
}

// check loads every checkpoint left, by history and one by one, against
// the states written; it returns the seqs left.
func (d *dataThread) check(t *testing.T) []int64 {
	t.Helper()
	ctx := context.Background()
	var left []int64
	for cp, err := range d.s.History(ctx, store.HistoryRequest{Thread: d.id, WithState: true}) {
		if err != nil {
			t.Fatalf("history: %v", err)
		}
		if got, want := cp.State.String(), d.docs[cp.Seq].String(); got != want {
			t.Fatalf("checkpoint %d in the history: %s, want %s", cp.Seq, got, want)
		}
		left = append(left, cp.Seq)
	}
	for _, seq := range left {
		cp, err := d.s.Load(ctx, store.LoadRequest{Thread: d.id, Seq: seq})
		if err != nil || cp.State.String() != d.docs[seq].String() {
			t.Fatalf("load %d: %v %s", seq, err, cp.State.String())
		}
	}
	slices.Sort(left)
	return left
}

// oldData is what testPruneDeletesOldData looks for in the storage's
// bytes: the secret of checkpoint 1 and pieces of its blobs as stored,
// and, when they are sealed, a kept state's note, which must never be
// there in the clear.
type oldData struct {
	secret, note string
	pieces       [][]byte
	sealed       bool
}

// storedOldData reads checkpoint 1 of d's thread as the backend holds it
// (sealed, in an encrypted store).
func storedOldData(t *testing.T, d *dataThread) oldData {
	t.Helper()
	b := d.s.(interface{ Backend() driver.Backend }).Backend()
	rows, err := b.Rows(context.Background(), driver.RowQuery{Thread: d.id, From: 1, To: 1, Snapshots: true})
	if err != nil || len(rows) != 1 || len(rows[0].Snapshot) < 32 {
		t.Fatalf("checkpoint 1 as stored: %v %d rows", err, len(rows))
	}
	o := oldData{secret: d.secret, note: d.note, sealed: !bytes.Contains(rows[0].Patch, []byte(d.secret))}
	for _, blob := range [][]byte{rows[0].Patch, rows[0].Snapshot} {
		mid := len(blob) / 2
		o.pieces = append(o.pieces, bytes.Clone(blob[mid-12:mid+12]))
	}
	return o
}

// present checks that the storage's bytes hold what gone looks for: the
// check can see it.
func (o oldData) present(t *testing.T, raw []byte) {
	t.Helper()
	for i, p := range o.pieces {
		if !bytes.Contains(raw, p) {
			t.Fatalf("before the prune, the storage does not hold piece %d of checkpoint 1 (%x): the check cannot see it", i, p)
		}
	}
	if !o.sealed && !bytes.Contains(raw, []byte(o.secret)) {
		t.Fatal("before the prune, the storage does not hold the secret in the clear: the check cannot see it")
	}
}

// gone checks that the storage's bytes hold nothing of checkpoint 1, and
// no kept state in the clear when blobs are sealed.
func (o oldData) gone(t *testing.T, raw []byte) {
	t.Helper()
	if bytes.Contains(raw, []byte(o.secret)) {
		t.Fatal("the secret of pruned checkpoint 1 is still stored")
	}
	for i, p := range o.pieces {
		if bytes.Contains(raw, p) {
			t.Fatalf("piece %d of pruned checkpoint 1 as stored (%x) is still stored", i, p)
		}
	}
	if o.sealed && bytes.Contains(raw, []byte(o.note)) {
		t.Fatal("a kept state is stored in the clear: the snapshot given to the oldest kept checkpoint is not sealed")
	}
}

// testPruneDeletesOldData: keep-last N keeps N checkpoints of each branch
// and deletes the others, the first one's secret with them: afterwards no
// byte of the storage (after its vacuum) holds the secret, in the clear
// or as checkpoint 1's stored (sealed) blobs; every checkpoint left
// rebuilds to its state; the oldest kept checkpoint of each branch got a
// snapshot, sealed in an encrypted store; the paused branch still resumes
// — the writer's cached idea of its tip is older than the prune — with
// the pending writes of the step it paused in; the main line forks on.
func testPruneDeletesOldData(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	d := newDataThread(t, s)
	old := storedOldData(t, d)
	if h.Bytes != nil {
		old.present(t, h.Bytes(t, s))
	}
	res, err := s.Prune(ctx, store.PruneRequest{Thread: d.id, KeepLast: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Kept: 4 and 3 (the main line), 6 and 5 (the paused branch); 3 and 5
	// are rebuilt from snapshots of their own.
	if left := d.check(t); fmt.Sprint(left) != "[3 4 5 6]" || res.Checkpoints != 2 || res.Rebased != 2 || res.RebasedBytes <= 0 || res.Threads != 1 {
		t.Fatalf("keep-last 2 left %v: %+v", left, res)
	}
	if v, ok := s.(interface{ Backend() driver.Backend }).Backend().(driver.Vacuumer); ok {
		if err := v.Vacuum(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if h.Bytes != nil {
		old.gone(t, h.Bytes(t, s))
	}
	ws, err := s.Writes(ctx, d.id, "", 5)
	if err != nil || len(ws) != 1 || ws[0].Task != "lookup" {
		t.Fatalf("the pending writes of the step the branch paused in: %v %+v", err, ws)
	}
	d.goesOn(t)
}

// goesOn resumes the paused branch of a pruned data thread on the state
// of 5, through this engine's cached head (6 as committed, before the
// prune rebased it), forks the main line's tip, and prunes again.
func (d *dataThread) goesOn(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	d.append(t, 6, state.Update{"answer": "yes"}, 0, store.Meta{})
	doc, patch, err := state.MustSchema().Apply(d.docs[4], state.Update{"n": 5})
	if err != nil {
		t.Fatal(err)
	}
	if fk, err := d.s.Fork(ctx, store.ForkRequest{Thread: d.id, At: 4, Patch: patch}); err != nil || fk.Seq != 8 {
		t.Fatalf("fork at the main line's tip: %d %v", fk.Seq, err)
	}
	d.docs[8] = doc
	if left := d.check(t); fmt.Sprint(left) != "[3 4 5 6 7 8]" {
		t.Fatalf("after resuming: %v", left)
	}
	// Kept: 8 and 4, 7 and 6, and 5, which the paused 6 resumes from.
	if res, err := d.s.Prune(ctx, store.PruneRequest{Thread: d.id, KeepLast: 2}); err != nil || res.Checkpoints != 1 || res.Rebased != 1 {
		t.Fatalf("second prune: %+v %v", res, err)
	}
	if left := d.check(t); fmt.Sprint(left) != "[4 5 6 7 8]" {
		t.Fatalf("after the second prune: %v", left)
	}
}
