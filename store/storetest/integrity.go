package storetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Inc, as the value of Harness.Edit, adds to a numeric column instead of
// setting it.
type Inc int64

// Columns Harness.Edit must support. Checkpoint columns address the row
// ref names; "snapshot" the data of its snapshot; "thread.*" the thread
// record ref.Thread. Moving a row ("thread", "ns", "seq") leaves it at the
// new key.
var (
	CheckpointColumns = []string{"thread", "ns", "seq", "parent", "base", "since", "base_size", "status", "created_at", "has_snapshot", "meta", "patch"}
	ThreadColumns     = []string{"thread.id", "thread.tenant", "thread.metadata", "thread.created_at"}
)

// editCase is one column edit and where the store must report it.
type editCase struct {
	column string
	value  any
	// where the edited row is found afterwards
	thread, ns string
	seq        int64
}

func editCases() []editCase {
	rawPatch := func() []byte {
		p, _ := state.ParsePatch([]byte(`[{"op":"replace","path":"/count","value":666}]`))
		return rawBlob(state.EncodePatch(nil, p))
	}
	return []editCase{
		{column: "thread", value: "moved-away", thread: "moved-away", seq: 4},
		{column: "ns", value: "other:ns", ns: "other:ns", seq: 4},
		{column: "seq", value: Inc(1000), seq: 1004},
		{column: "parent", value: Inc(-1), seq: 4},
		{column: "base", value: Inc(1), seq: 4},
		{column: "since", value: Inc(1), seq: 4},
		{column: "base_size", value: Inc(1), seq: 4},
		{column: "status", value: int64(store.StatusFailed), seq: 4},
		{column: "created_at", value: Inc(1), seq: 4},
		{column: "has_snapshot", value: true, seq: 4},
		{column: "meta", value: []byte(`{"nodes":["evil"],"next":["evil"]}`), seq: 4},
		// A well-formed patch blob, CRC and all, from somewhere else.
		{column: "patch", value: rawPatch(), seq: 4},
	}
}

// rawBlob wraps a payload as the engine stores an uncompressed blob: codec
// byte 0, the CRC-32C of the payload (little endian), the payload.
func rawBlob(payload []byte) []byte {
	out := []byte{0, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(out[1:], crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli)))
	return append(out, payload...)
}

// testEditedRows edits every column of a checkpoint row and of a thread
// row, one thread each, and expects a *CorruptError naming the row; a
// thread nobody edited stays readable throughout.
func testEditedRows(t *testing.T, h Harness) {
	if h.Edit == nil {
		t.Skip("backend cannot be edited from the outside")
	}
	ctx := context.Background()
	s := h.Open(t, store.Options{SnapshotCache: -1})
	t.Cleanup(func() { _ = s.Close() })
	good := newModel(t, s, "good")
	for i := 1; i <= 6; i++ {
		good.step(i)
	}
	checkGood := func(t *testing.T) {
		t.Helper()
		good.t = t
		for seq := int64(1); seq <= 6; seq++ {
			good.checkLoad(seq)
		}
		if _, err := s.Thread(ctx, "good"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range editCases() {
		t.Run(tc.column, func(t *testing.T) {
			thread := "victim-" + tc.column
			m := newModel(t, s, thread)
			m.t = t
			for i := 1; i <= 6; i++ {
				m.step(i)
			}
			if tc.thread == "" {
				tc.thread = thread
			}
			h.Edit(t, s, store.Ref{Thread: thread, Seq: 4}, tc.column, tc.value)
			_, err := s.Load(ctx, store.LoadRequest{Thread: tc.thread, Namespace: tc.ns, Seq: tc.seq})
			wantCorrupt(t, err, tc.thread, tc.ns, tc.seq)
			if tc.column != "thread" && tc.column != "ns" && tc.column != "seq" {
				// The head replays through the edited row.
				_, err = s.Load(ctx, store.LoadRequest{Thread: thread})
				wantCorrupt(t, err, thread, "", 4)
			}
			sawCorrupt := false
			for _, err := range s.History(ctx, store.HistoryRequest{Thread: tc.thread, Namespace: tc.ns, WithState: true}) {
				if err != nil {
					sawCorrupt = errors.Is(err, store.ErrCorrupt)
					break
				}
			}
			if !sawCorrupt {
				t.Fatal("history over the edited row gave no ErrCorrupt")
			}
			checkGood(t)
		})
	}
	testEditedThreadRows(t, h, s, checkGood)
}

// testEditedThreadRows edits each column of thread records: the edited
// record is a CorruptError naming it, listing threads reports it, and
// the good thread stays readable.
func testEditedThreadRows(t *testing.T, h Harness, s store.Store, checkGood func(*testing.T)) {
	ctx := context.Background()
	for _, tc := range []struct {
		column string
		value  any
		id     string
	}{
		{"thread.id", "renamed", "renamed"},
		{"thread.tenant", "evil", ""},
		{"thread.metadata", `{"file":"evil.md"}`, ""},
		{"thread.created_at", Inc(1), ""},
	} {
		t.Run(tc.column, func(t *testing.T) {
			id := "vt-" + tc.column[len("thread."):]
			id = string(bytes.ReplaceAll([]byte(id), []byte("_"), []byte("-")))
			if _, err := s.CreateThread(ctx, store.Thread{ID: id, Tenant: "acme", Metadata: map[string]any{"file": "agent.md", "n": 1.5}}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Thread(ctx, id); err != nil {
				t.Fatalf("before the edit: %v", err)
			}
			if tc.id == "" {
				tc.id = id
			}
			h.Edit(t, s, store.Ref{Thread: id}, tc.column, tc.value)
			_, err := s.Thread(ctx, tc.id)
			var ce *store.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, store.ErrCorrupt) || ce.Thread != tc.id {
				t.Fatalf("thread after editing %s: %v; want a CorruptError naming %q", tc.column, err, tc.id)
			}
			sawCorrupt := false
			for _, err := range s.Threads(ctx, store.ThreadFilter{}) {
				if errors.As(err, &ce) && ce.Thread == tc.id {
					sawCorrupt = true
				}
			}
			if !sawCorrupt {
				t.Fatal("listing threads did not report the edited record")
			}
			checkGood(t)
		})
	}
}

func wantCorrupt(t *testing.T, err error, thread, ns string, seq int64) {
	t.Helper()
	var ce *store.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("err = %v, want a CorruptError", err)
	}
	if ce.Thread != thread || ce.Namespace != ns || ce.Seq != seq {
		t.Fatalf("%v names thread %q ns %q seq %d; want %q %q %d", err, ce.Thread, ce.Namespace, ce.Seq, thread, ns, seq)
	}
}

// testInvalidSnapshot stores a snapshot whose CRC is right but whose
// document is not valid JSON: the load reports the thread and seq.
func testInvalidSnapshot(t *testing.T, h Harness) {
	if h.Edit == nil {
		t.Skip("backend cannot be edited from the outside")
	}
	ctx := context.Background()
	s := h.Open(t, store.Options{SnapshotCache: -1})
	t.Cleanup(func() { _ = s.Close() })
	doc, patch, err := state.MustSchema().Apply(state.EmptyDoc(), state.Update{"a": 123})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: "snap", Namespace: "sub:1", Patch: patch, State: doc}); err != nil {
		t.Fatal(err)
	}
	payload := state.EncodeDoc(nil, doc)
	i := bytes.Index(payload, []byte("123"))
	if i < 0 {
		t.Fatalf("encoded doc %q does not hold the value", payload)
	}
	payload[i+1] = 'x' // 1x3: same length, not JSON
	h.Edit(t, s, store.Ref{Thread: "snap", Namespace: "sub:1", Seq: 1}, "snapshot", rawBlob(payload))
	_, err = s.Load(ctx, store.LoadRequest{Thread: "snap", Namespace: "sub:1"})
	wantCorrupt(t, err, "snap", "sub:1", 1)
	if ce := (*store.CorruptError)(nil); errors.As(err, &ce) && ce.What != "snapshot" {
		t.Fatalf("damage reported in %q, want snapshot", ce.What)
	}
}
