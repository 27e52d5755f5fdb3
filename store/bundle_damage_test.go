package store_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// smallBundle is the bundle of a small thread: three checkpoints, a
// pending write, metadata.
func smallBundle(t testing.TB) []byte {
	t.Helper()
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	defer s.Close()
	schema := state.MustSchema(state.WithField("n", "replace"))
	doc := state.EmptyDoc()
	var head int64
	for i := range 3 {
		next, patch, err := schema.Apply(doc, state.Update{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := s.Append(ctx, store.Checkpoint{Thread: "small", Parent: head, Patch: patch, State: next})
		if err != nil {
			t.Fatal(err)
		}
		doc, head = next, cp.Seq
	}
	if err := s.PutWrites(ctx, "small", "", 2, []store.Write{{Task: "t", Node: "n", Update: json.RawMessage(`{"n":5}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetMetadata(ctx, "small", map[string]any{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := store.ExportBundle(ctx, s, "small", &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// refuse imports b into a new memory store and checks that it is refused
// with ErrBadBundle and that the store holds no thread afterwards.
func refuse(t *testing.T, b []byte, what string) error {
	t.Helper()
	s := inmem.Open(store.Options{})
	defer s.Close()
	_, err := store.ImportBundle(context.Background(), s, bytes.NewReader(b), store.ImportOptions{})
	if !errors.Is(err, store.ErrBadBundle) {
		t.Fatalf("%s: %v, want ErrBadBundle", what, err)
	}
	for th, err := range s.Threads(context.Background(), store.ThreadFilter{}) {
		t.Fatalf("%s: thread %q left behind (%v)", what, th.ID, err)
	}
	return err
}

// TestBundleTruncated: every prefix of a bundle is refused.
func TestBundleTruncated(t *testing.T) {
	b := smallBundle(t)
	for n := range len(b) {
		refuse(t, b[:n], "prefix")
	}
}

// TestBundleDamaged: a bundle with any one byte changed is refused.
func TestBundleDamaged(t *testing.T) {
	b := smallBundle(t)
	for i := range b {
		d := bytes.Clone(b)
		d[i] ^= 0x5a
		refuse(t, d, "flipped byte")
	}
}

// TestBundleNewerFormat: a bundle of a newer format says so.
func TestBundleNewerFormat(t *testing.T) {
	b := smallBundle(t)
	binary.BigEndian.PutUint16(b[8:], store.BundleFormat+1)
	if err := refuse(t, b, "newer"); !errors.Is(err, store.ErrUnsupportedFormat) {
		t.Fatalf("%v, want ErrUnsupportedFormat", err)
	}
}

// TestBundleForged: a bundle edited and given a correct checksum is
// refused. With the file's checksum alone recomputed, any edit of a
// checkpoint is (its row checksum); with the rows' recomputed too, any
// edit that breaks the history: a patch that does not lead to the state
// recorded for the end of its branch, a snapshot that is not its parent's
// state with its patch applied, a missing or later parent, a bad status,
// namespace or metadata.
func TestBundleForged(t *testing.T) {
	b := smallBundle(t)
	patch := func(js string) []byte {
		p, err := state.ParsePatch([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return state.EncodePatch(nil, p)
	}
	at := func(seq int64, edit func(cp *store.BundleCheckpoint)) func(cp *store.BundleCheckpoint) {
		return func(cp *store.BundleCheckpoint) {
			if cp.Seq == seq {
				edit(cp)
			}
		}
	}
	cases := []struct {
		name string
		edit func(cp *store.BundleCheckpoint)
	}{
		{"patch changed", at(2, func(cp *store.BundleCheckpoint) {
			cp.Patch = patch(`[{"op":"replace","path":"/n","value":1},{"op":"add","path":"/x","value":1}]`)
		})},
		{"last patch changed", at(3, func(cp *store.BundleCheckpoint) { cp.Patch = patch(`[{"op":"replace","path":"/n","value":7}]`) })},
		{"patch that does not apply", at(2, func(cp *store.BundleCheckpoint) { cp.Patch = patch(`[{"op":"replace","path":"/y","value":7}]`) })},
		{"snapshot changed", at(1, func(cp *store.BundleCheckpoint) { cp.Snapshot = state.EncodeDoc(nil, state.EmptyDoc()) })},
		{"state digest dropped", at(3, func(cp *store.BundleCheckpoint) { cp.State = "" })},
		{"parent missing", at(2, func(cp *store.BundleCheckpoint) { cp.Parent = 9 })},
		{"seq out of order", at(1, func(cp *store.BundleCheckpoint) { cp.Seq = 3 })},
		{"status", func(cp *store.BundleCheckpoint) { cp.Status = 9 }},
		{"namespace not in the manifest", func(cp *store.BundleCheckpoint) { cp.Namespace = "other" }},
		{"first checkpoint without snapshot", at(1, func(cp *store.BundleCheckpoint) { cp.Snapshot = nil })},
		{"metadata not an object", func(cp *store.BundleCheckpoint) { cp.Meta = []byte(`[1]`) }},
		{"external id too long", func(cp *store.BundleCheckpoint) { cp.ExternalID = strings.Repeat("x", store.MaxExternalID+1) }},
		{"writes out of order", at(2, func(cp *store.BundleCheckpoint) {
			cp.Writes = []store.BundleWrite{{Task: "b", Node: "n", Update: []byte("{}")}, {Task: "a", Node: "n", Update: []byte("{}")}}
		})},
	}
	// The forger's tool itself makes bundles that import.
	s := inmem.Open(store.Options{})
	if _, err := store.ImportBundle(context.Background(), s, bytes.NewReader(store.ForgeBundle(b, true, func(*store.BundleCheckpoint) {})), store.ImportOptions{}); err != nil {
		t.Fatalf("an unchanged bundle re-sealed: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			refuse(t, store.ForgeBundle(b, false, c.edit), c.name)
			t.Log(refuse(t, store.ForgeBundle(b, true, c.edit), c.name))
		})
	}
}
