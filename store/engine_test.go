package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store/driver"
)

// rowsBackend is the smallest Backend the engine tests need: rows of one
// thread namespace in a slice.
type rowsBackend struct {
	driver.Backend
	rows []driver.Row
}

func (b *rowsBackend) Insert(_ context.Context, r driver.Row) error {
	if int(r.Seq) != len(b.rows)+1 {
		return ErrConflict
	}
	b.rows = append(b.rows, r)
	return nil
}

func (b *rowsBackend) Rows(_ context.Context, q driver.RowQuery) ([]driver.Row, error) {
	var out []driver.Row
	for _, r := range b.rows {
		if r.Seq >= q.From && (q.To == 0 || r.Seq <= q.To) {
			out = append(out, r)
		}
	}
	if q.Desc {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

func (b *rowsBackend) Close() error { return nil }

// prose is n words of text that compresses like prose, not like padding,
// different for each i.
func prose(i, n int) string {
	words := strings.Fields("the quick brown fox jumps over the lazy dog while agents argue about state")
	var sb strings.Builder
	for j := range n {
		sb.WriteString(words[(i*7+j*3)%len(words)])
		sb.WriteByte(' ')
	}
	return sb.String()
}

// TestStorageBound checks the bound doc.go promises, for several ratios:
// snapshot bytes ≤ patch bytes / ratio + the last snapshot, and no
// checkpoint replays more than max(ratio × its snapshot, MinSnapshotBytes)
// plus one patch.
func TestStorageBound(t *testing.T) {
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
	for _, ratio := range []float64{0.25, 1, 4} {
		t.Run(fmt.Sprint(ratio), func(t *testing.T) {
			b := &rowsBackend{}
			e := New(b, Options{SnapshotRatio: ratio})
			doc := state.EmptyDoc()
			for i := 1; i <= 1500; i++ {
				nd, p, err := schema.Apply(doc, state.Update{"messages": state.Message{ID: fmt.Sprint(i), Content: prose(i, 30)}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.Append(context.Background(), Checkpoint{Thread: "t", Parent: int64(i - 1), Patch: p, State: nd}); err != nil {
					t.Fatal(err)
				}
				doc = nd
			}
			var patchBytes, snapBytes, lastSnap, maxPatch int64
			for _, r := range b.rows {
				patchBytes += int64(len(r.Patch))
				maxPatch = max(maxPatch, int64(len(r.Patch)))
				if r.HasSnapshot {
					snapBytes += int64(len(r.Snapshot))
					lastSnap = int64(len(r.Snapshot))
				}
				if limit := max(int64(ratio*float64(r.BaseSize)), e.minSnap) + maxPatch; r.Since > limit {
					t.Fatalf("seq %d replays %d patch bytes from seq %d (snapshot %d bytes); bound %d", r.Seq, r.Since, r.Base, r.BaseSize, limit)
				}
			}
			if bound := int64(float64(patchBytes)/ratio) + lastSnap; snapBytes > bound {
				t.Fatalf("snapshots %d bytes > patches %d / %.2f + last %d", snapBytes, patchBytes, ratio, lastSnap)
			}
			t.Logf("ratio %.2f: patches %d B, snapshots %d B in %d rows", ratio, patchBytes, snapBytes, len(b.rows))
			got, err := e.Load(context.Background(), LoadRequest{Thread: "t"})
			if err != nil || got.State.String() != doc.String() {
				t.Fatalf("head load: %v", err)
			}
		})
	}
}

func TestBlobRoundTrip(t *testing.T) {
	for _, payload := range [][]byte{nil, []byte("short"), []byte(strings.Repeat("abc", 500))} {
		for _, comp := range []bool{false, true} {
			scratch := []byte{}
			b := encodeBlob(payload, comp, &scratch)
			got, err := decodeBlob(b)
			if err != nil || string(got) != string(payload) {
				t.Fatalf("round trip (%d bytes, compress %v): %v", len(payload), comp, err)
			}
			// Any single flipped bit is caught.
			for i := range b {
				bad := append([]byte(nil), b...)
				bad[i] ^= 0x10
				if out, err := decodeBlob(bad); err == nil && string(out) == string(payload) && i >= blobHeader {
					t.Fatalf("flip at %d not detected", i)
				}
			}
		}
	}
}

// FuzzDecodeRow feeds damaged stored rows to the checkpoint decoder: it
// must return a CorruptError, never panic.
func FuzzDecodeRow(f *testing.F) {
	d, _ := state.ParseDoc([]byte(`{"a":[1,2],"b":"x"}`))
	p, _ := state.ParsePatch([]byte(`[{"op":"add","path":"/a/-","value":3}]`))
	f.Add(encodeBlob(state.EncodePatch(nil, p), true, nil), encodeBlob(state.EncodeDoc(nil, d), true, nil), []byte(`{"nodes":["n"]}`), uint8(1))
	f.Add([]byte{1, 0, 0, 0, 0, 9}, []byte{0}, []byte(`{`), uint8(9))
	// A snapshot whose CRC is right but whose JSON is not.
	bad := state.EncodeDoc(nil, d)
	bad[bytes.IndexByte(bad, '2')] = '!'
	f.Add(encodeBlob(state.EncodePatch(nil, p), false, nil), encodeBlob(bad, false, nil), []byte(`{"next":["a"]}`), uint8(2))
	f.Fuzz(func(t *testing.T, patch, snap, meta []byte, status uint8) {
		r := driver.Row{Thread: "t", Seq: 1, Base: 1, BaseSize: int64(len(snap)), Status: Status(status), Meta: meta, Patch: patch, Snapshot: snap, HasSnapshot: true}
		if _, err := checkpoint(&r); err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Seq != 1 {
				t.Fatalf("untyped error %v", err)
			}
		}
		if _, err := decodeSnapshot(&r); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("untyped snapshot error %v", err)
		}
		// A row whose checksum does not match names the row; one whose
		// checksum matches passes.
		r.Sum = driver.RowChecksum(&r) ^ uint32(status)<<8 ^ 1
		var ce *CorruptError
		if err := verifyRow(&r); !errors.As(err, &ce) || ce.Seq != 1 || ce.Thread != "t" {
			t.Fatalf("edited row: %v", err)
		}
		r.Sum = driver.RowChecksum(&r)
		if err := verifyRow(&r); err != nil {
			t.Fatalf("intact row: %v", err)
		}
	})
}

// FuzzThreadChecksum feeds thread metadata to the checksum: it never
// panics, and a JSON object counts by its value, so reordering its keys or
// reformatting it (as Postgres jsonb does) keeps the checksum.
func FuzzThreadChecksum(f *testing.F) {
	for _, seed := range []string{`{"file":"agent.md","n":1.5}`, `{"b":1,"a":[1,2,{"z":null}]}`, `{"n":1e2,"m":100}`, `{"s":"\u00e9<>&"}`, `{`, `null`, ``, `[1]`, `"x"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, meta []byte) {
		rec := driver.ThreadRecord{ID: "t", Tenant: "acme", Metadata: meta, CreatedAt: 7}
		sum := driver.ThreadChecksum(&rec)
		rec.Sum = sum
		if err := verifyThread(&rec); err != nil {
			t.Fatalf("intact record: %v", err)
		}
		var v map[string]any
		if json.Unmarshal(meta, &v) != nil || v == nil {
			return
		}
		again, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		rec.Metadata = again
		if driver.ThreadChecksum(&rec) != sum {
			t.Fatalf("%s and %s have different checksums", meta, again)
		}
		rec.Tenant = "other"
		if err := verifyThread(&rec); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("edited tenant: %v", err)
		}
	})
}

func TestSnapCache(t *testing.T) {
	c := newSnapCache(100)
	d, _ := state.ParseDoc([]byte(`{"a":1}`))
	c.put(snapKey{"a", "", 1}, d, 60)
	c.put(snapKey{"b", "", 1}, d, 30)
	if _, ok := c.get(snapKey{"a", "", 1}); !ok {
		t.Fatal("a missing")
	}
	c.put(snapKey{"c", "", 1}, d, 30) // evicts b, the least recently used
	if _, ok := c.get(snapKey{"b", "", 1}); ok {
		t.Fatal("b should be evicted")
	}
	if _, ok := c.get(snapKey{"a", "", 1}); !ok {
		t.Fatal("a evicted out of order")
	}
	c.put(snapKey{"big", "", 1}, d, 1000) // larger than the budget: not kept
	if _, ok := c.get(snapKey{"big", "", 1}); ok {
		t.Fatal("oversized entry kept")
	}
	c.dropThread("a")
	if _, ok := c.get(snapKey{"a", "", 1}); ok || c.used != 30 {
		t.Fatalf("dropThread: used %d", c.used)
	}
	var nilCache *snapCache
	nilCache.put(snapKey{}, d, 1)
	if _, ok := nilCache.get(snapKey{}); ok {
		t.Fatal("nil cache hit")
	}
}
