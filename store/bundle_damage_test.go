package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// smallBundle is the bundle of a small thread: two checkpoints, a pending
// write, metadata.
func smallBundle(t testing.TB) []byte {
	t.Helper()
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	defer s.Close()
	schema := state.MustSchema(state.WithField("n", "replace"))
	doc := state.EmptyDoc()
	var head int64
	for i := range 2 {
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

// forge rewrites the checkpoint sections of a bundle through edit, then
// seals it again with a correct checksum, as a forger would.
func forge(t *testing.T, b []byte, edit func(cp map[string]any)) []byte {
	t.Helper()
	out := bytes.Clone(b[:10])
	for off := 10; ; {
		kind := b[off]
		n := int(binary.BigEndian.Uint32(b[off+2:]))
		payload := b[off+6 : off+6+n]
		if kind == 'Z' {
			break
		}
		if kind == 'C' {
			if b[off+1] != 0 {
				t.Fatal("compressed checkpoint in the small bundle")
			}
			var cp map[string]any
			if err := json.Unmarshal(payload, &cp); err != nil {
				t.Fatal(err)
			}
			edit(cp)
			payload, _ = json.Marshal(cp)
		}
		out = append(out, kind, 0)
		out = binary.BigEndian.AppendUint32(out, uint32(len(payload)))
		out = append(out, payload...)
		off += 6 + n
	}
	sum := sha256.Sum256(out)
	out = append(out, 'Z', 0, 0, 0, 0, 32)
	return append(out, sum[:]...)
}

// TestBundleForged: a bundle edited and given a correct checksum is still
// refused when its history does not hold together.
func TestBundleForged(t *testing.T) {
	b := smallBundle(t)
	encPatch := func(v int) []byte {
		p, err := state.ParsePatch([]byte(`[{"op":"replace","path":"/n","value":` + string(rune('0'+v)) + `}]`))
		if err != nil {
			t.Fatal(err)
		}
		return state.EncodePatch(nil, p)
	}
	cases := []struct {
		name string
		edit func(cp map[string]any)
	}{
		{"patch changed", func(cp map[string]any) {
			if cp["seq"].(float64) == 2 {
				cp["patch"] = encPatch(7)
			}
		}},
		{"snapshot changed", func(cp map[string]any) {
			if cp["seq"].(float64) == 1 {
				cp["snapshot"] = state.EncodeDoc(nil, state.EmptyDoc())
			}
		}},
		{"parent missing", func(cp map[string]any) {
			if cp["seq"].(float64) == 2 {
				cp["parent"] = 9
			}
		}},
		{"parent after", func(cp map[string]any) {
			if cp["seq"].(float64) == 1 {
				cp["seq"] = 3
			}
		}},
		{"status", func(cp map[string]any) { cp["status"] = 9 }},
		{"namespace not in the manifest", func(cp map[string]any) { cp["ns"] = "other" }},
		{"first checkpoint without snapshot", func(cp map[string]any) { delete(cp, "snapshot") }},
		{"metadata not an object", func(cp map[string]any) { cp["meta"] = []byte(`[1]`) }},
		{"writes out of order", func(cp map[string]any) {
			if cp["seq"].(float64) == 2 {
				cp["writes"] = []map[string]any{{"task": "b", "node": "n", "update": []byte("{}")}, {"task": "a", "node": "n", "update": []byte("{}")}}
			}
		}},
		{"unknown field", func(cp map[string]any) { cp["extra"] = 1 }},
	}
	// The forger's tool itself makes bundles that import.
	s := inmem.Open(store.Options{})
	if _, err := store.ImportBundle(context.Background(), s, bytes.NewReader(forge(t, b, func(map[string]any) {})), store.ImportOptions{}); err != nil {
		t.Fatalf("an unchanged bundle re-sealed: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := refuse(t, forge(t, b, c.edit), c.name)
			t.Log(err)
		})
	}
}
