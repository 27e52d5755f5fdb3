package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// TestKeyring returns a keyring of test keys n, …: key i is 32 bytes of
// the value i, so keyrings made by different calls share keys.
func TestKeyring(t testing.TB, n ...byte) *store.Keyring {
	t.Helper()
	keys := make([][]byte, len(n))
	for i, v := range n {
		keys[i] = bytes.Repeat([]byte{v}, 32)
	}
	k, err := store.NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// RunEncrypted runs the suite on stores that encrypt at rest (every store
// the harness opens gets a keyring unless the test gives one), then the
// tests of encryption itself: blobs moved between rows refused, plaintext
// refused, no key, rotation and Rekey. The backend must implement
// driver.BlobRewriter.
func RunEncrypted(t *testing.T, h Harness) {
	ring := TestKeyring(t, 1)
	eh := h
	eh.Open = func(t *testing.T, o store.Options) store.Store {
		if o.SnapshotCache < 0 && strings.Contains(t.Name(), "/nocache/") {
			// Encryption is below the cache: the plain suite runs without
			// it, and the encryption tests read without it.
			t.Skip("the encrypted suite runs with the snapshot cache only")
		}
		if o.Keyring == nil {
			o.Keyring = ring
		}
		return h.Open(t, o)
	}
	if h.Reopen != nil {
		// The harness reopens without options: the engine it returns is
		// replaced by one with the keyring over the same backend.
		eh.Reopen = func(t *testing.T, s store.Store) store.Store {
			return store.New(h.Reopen(t, s).(*store.Engine).Backend(), store.Options{Keyring: ring})
		}
	}
	Run(t, eh)
	t.Run("Encryption", func(t *testing.T) { testEncryption(t, h) })
}

// encFixture is an encrypted store with two threads of other tenants,
// pending writes, a run and its events.
type encFixture struct {
	s  *store.Engine
	bw driver.BlobRewriter
}

func newEncFixture(t *testing.T, h Harness) *encFixture {
	t.Helper()
	ctx := context.Background()
	s := h.Open(t, store.Options{Keyring: TestKeyring(t, 1), SnapshotCache: -1}).(*store.Engine)
	t.Cleanup(func() { _ = s.Close() })
	bw, ok := s.Backend().(driver.BlobRewriter)
	if !ok {
		t.Fatalf("%T does not implement driver.BlobRewriter", s.Backend())
	}
	for _, th := range []struct{ id, tenant string }{{"ea", "acme"}, {"eb", "other"}} {
		if _, err := s.CreateThread(ctx, store.Thread{ID: th.id, Tenant: th.tenant}); err != nil {
			t.Fatal(err)
		}
		m := newModel(t, s, th.id)
		for i := 1; i <= 4; i++ {
			m.step(i)
		}
		if err := s.PutWrites(ctx, th.id, "", 4, []store.Write{{Task: "n:0", Node: "n", Update: json.RawMessage(`{"count":99}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	rl, err := store.RunLogOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.PutRun(ctx, store.RunRecord{ID: "run1", Thread: "ea", Tenant: "acme", Status: "success", Data: []byte(`{"input":"secret"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := rl.AppendEvents(ctx, "run1", []store.EventRecord{{Seq: 1, Data: []byte(`{"e":1}`)}, {Seq: 2, Data: []byte(`{"e":2}`)}}); err != nil {
		t.Fatal(err)
	}
	is, err := store.ItemsOf(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "other"} {
		mustPut(t, is, store.PutOp{Tenant: tenant, Namespace: []string{"notes"}, Key: "k", Value: map[string]any{"text": "secret of " + tenant}, NoIndex: true})
	}
	return &encFixture{s: s, bw: bw}
}

// raw reads a stored row as the backend keeps it.
func (f *encFixture) raw(t *testing.T, thread string, seq int64) driver.Row {
	t.Helper()
	rows, err := f.s.Backend().Rows(context.Background(), driver.RowQuery{Thread: thread, From: seq, To: seq, Snapshots: true})
	if err != nil || len(rows) != 1 {
		t.Fatalf("raw row %s@%d: %v %v", thread, seq, rows, err)
	}
	return rows[0]
}

// put stores row nw in place of old, with a checksum that fits: only the
// encryption can tell.
func (f *encFixture) put(t *testing.T, old, nw driver.Row) driver.Row {
	t.Helper()
	nw.Sum = driver.RowChecksum(&nw)
	if ok, err := f.bw.RewriteRow(context.Background(), old, nw); err != nil || !ok {
		t.Fatalf("rewrite row: %v %v", ok, err)
	}
	return nw
}

func testEncryption(t *testing.T, h Harness) {
	ctx := context.Background()
	f := newEncFixture(t, h)
	for _, tc := range []struct {
		name string
		edit func(nw *driver.Row)
	}{
		{"patch from another seq", func(nw *driver.Row) { nw.Patch = f.raw(t, "ea", 3).Patch }},
		{"patch from another thread and tenant", func(nw *driver.Row) { nw.Patch = f.raw(t, "eb", 2).Patch }},
		{"plaintext patch", func(nw *driver.Row) { nw.Patch = rawBlob([]byte(`[]`)) }},
		{"plaintext metadata", func(nw *driver.Row) { nw.Meta = []byte(`{"source":"step"}`) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := f.raw(t, "ea", 2)
			nw := old
			nw.Snapshot = nil
			tc.edit(&nw)
			nw = f.put(t, old, nw)
			_, err := f.s.Load(ctx, store.LoadRequest{Thread: "ea", Seq: 2})
			wantCorrupt(t, err, "ea", "", 2)
			orig := old
			orig.Snapshot = nil
			f.put(t, nw, orig)
			if _, err := f.s.Load(ctx, store.LoadRequest{Thread: "ea", Seq: 2}); err != nil {
				t.Fatalf("restored row: %v", err)
			}
		})
	}
	t.Run("pending write from another thread", func(t *testing.T) { testSwappedWrite(t, f) })
	t.Run("item from another tenant", func(t *testing.T) { testSwappedItem(t, f) })
	t.Run("NoKey", func(t *testing.T) { checkNoKey(t, f.s.Backend(), "ea") })
	t.Run("Rekey", func(t *testing.T) { testRekey(t, f) })
	t.Run("RekeyWhileWriting", func(t *testing.T) { testRekeyWhileWriting(t, h) })
}

// testRekeyWhileWriting rekeys while a process that already has the new
// key list appends steps and rewrites a run record: nothing is lost or
// left on the old key, and every step loads with the new key alone.
func testRekeyWhileWriting(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t, store.Options{Keyring: TestKeyring(t, 1)}).(*store.Engine)
	t.Cleanup(func() { _ = s.Close() })
	m := newModel(t, s, "w")
	for i := 1; i <= 20; i++ {
		m.step(i)
	}
	b := s.Backend()
	writer := newModel(t, store.New(b, store.Options{Keyring: TestKeyring(t, 2, 1)}), "w")
	writer.head, writer.doc, writer.want, writer.ids = m.head, m.doc, m.want, m.ids
	rl, err := store.RunLogOf(writer.s)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := store.New(b, store.Options{Keyring: TestKeyring(t, 2, 1)}).Rekey(ctx)
		done <- err
	}()
	for i := 21; i <= 60; i++ {
		writer.step(i)
		if err := rl.PutRun(ctx, store.RunRecord{ID: "rw", Thread: "w", Status: "running", Data: []byte(fmt.Sprintf(`{"step":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	onlyNew := store.New(b, store.Options{Keyring: TestKeyring(t, 2), SnapshotCache: -1})
	check := newModel(t, onlyNew, "w")
	check.head, check.want = writer.head, writer.want
	for seq := int64(1); seq <= check.head; seq++ {
		check.checkLoad(seq)
	}
	newLog, err := store.RunLogOf(onlyNew)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := newLog.Run(ctx, "rw"); err != nil || string(r.Data) != `{"step":60}` {
		t.Fatalf("run after rekey: %+v %v", r, err)
	}
}

func testSwappedWrite(t *testing.T, f *encFixture) {
	ctx := context.Background()
	ws, err := f.bw.ThreadWrites(ctx, "eb")
	if err != nil || len(ws) != 1 {
		t.Fatalf("writes of eb: %v %v", ws, err)
	}
	wa, err := f.bw.ThreadWrites(ctx, "ea")
	if err != nil || len(wa) != 1 {
		t.Fatalf("writes of ea: %v %v", wa, err)
	}
	if ok, err := f.bw.RewriteWrite(ctx, wa[0], ws[0].Data); err != nil || !ok {
		t.Fatalf("rewrite write: %v %v", ok, err)
	}
	if _, err := f.s.Writes(ctx, "ea", "", 4); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("a write moved from another thread: %v, want ErrCorrupt", err)
	}
	moved := wa[0]
	moved.Data = ws[0].Data
	if ok, err := f.bw.RewriteWrite(ctx, moved, wa[0].Data); err != nil || !ok {
		t.Fatalf("restore write: %v %v", ok, err)
	}
}

// checkNoKey reads an encrypted store through an engine without keys:
// every read of a blob fails with ErrNoKey, never returns ciphertext.
func checkNoKey(t *testing.T, b driver.Backend, thread string) {
	ctx := context.Background()
	plain := store.New(b, store.Options{}) // shares the backend: not closed
	if _, err := plain.Load(ctx, store.LoadRequest{Thread: thread}); !errors.Is(err, store.ErrNoKey) {
		t.Fatalf("load without keys: %v, want ErrNoKey", err)
	}
	for _, err := range plain.History(ctx, store.HistoryRequest{Thread: thread}) {
		if !errors.Is(err, store.ErrNoKey) {
			t.Fatalf("history without keys: %v, want ErrNoKey", err)
		}
		break
	}
	if _, err := plain.Writes(ctx, thread, "", 4); !errors.Is(err, store.ErrNoKey) {
		t.Fatalf("writes without keys: %v, want ErrNoKey", err)
	}
	rl, err := store.RunLogOf(plain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rl.Run(ctx, "run1"); !errors.Is(err, store.ErrNoKey) {
		t.Fatalf("run without keys: %v, want ErrNoKey", err)
	}
	if _, err := rl.Events(ctx, "run1", 0, 0); !errors.Is(err, store.ErrNoKey) {
		t.Fatalf("events without keys: %v, want ErrNoKey", err)
	}
	is, err := store.ItemsOf(plain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := is.Get(ctx, store.GetOp{Tenant: "acme", Namespace: []string{"notes"}, Key: "k"}); !errors.Is(err, store.ErrNoKey) {
		t.Fatalf("item without keys: %v, want ErrNoKey", err)
	}
}

func testSwappedItem(t *testing.T, f *encFixture) {
	ctx := context.Background()
	ir, ok := f.s.Backend().(driver.ItemRewriter)
	if !ok {
		t.Fatalf("%T does not implement driver.ItemRewriter", f.s.Backend())
	}
	items, err := ir.StoredItems(ctx, driver.ItemKey{}, 10)
	if err != nil || len(items) != 2 || items[0].Tenant != "acme" {
		t.Fatalf("stored items: %v %v", items, err)
	}
	if ok, err := ir.RewriteItem(ctx, items[0].ItemKey, items[0].Value, items[1].Value); err != nil || !ok {
		t.Fatalf("rewrite item: %v %v", ok, err)
	}
	is, _ := store.ItemsOf(f.s)
	if _, err := is.Get(ctx, store.GetOp{Tenant: "acme", Namespace: []string{"notes"}, Key: "k"}); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("an item's value moved from another tenant: %v, want ErrCorrupt", err)
	}
	if ok, err := ir.RewriteItem(ctx, items[0].ItemKey, items[1].Value, items[0].Value); err != nil || !ok {
		t.Fatalf("restore item: %v %v", ok, err)
	}
}

// testRekey rotates from key 1 to key 2: before Rekey a keyring of key 2
// alone cannot read; after, it reads everything and key 1 alone cannot.
func testRekey(t *testing.T, f *encFixture) {
	ctx := context.Background()
	b := f.s.Backend()
	want := map[string]string{}
	for _, th := range []string{"ea", "eb"} {
		cp, err := f.s.Load(ctx, store.LoadRequest{Thread: th})
		if err != nil {
			t.Fatal(err)
		}
		want[th] = cp.State.String()
	}
	onlyNew := store.New(b, store.Options{Keyring: TestKeyring(t, 2), SnapshotCache: -1})
	if _, err := onlyNew.Load(ctx, store.LoadRequest{Thread: "ea"}); !errors.Is(err, store.ErrNoKey) {
		t.Fatalf("new key alone before rekey: %v, want ErrNoKey", err)
	}
	both := store.New(b, store.Options{Keyring: TestKeyring(t, 2, 1), SnapshotCache: -1})
	st, err := both.Rekey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 2 threads × 4 rows (2 snapshots: the first rows), a write each, a
	// run, 2 events.
	if st.Rewritten["checkpoints"] != 8 || st.Rewritten["snapshots"] != 2 || st.Rewritten["writes"] != 2 || st.Rewritten["runs"] != 1 || st.Rewritten["events"] != 2 || st.Rewritten["items"] != 2 || st.Changed != 0 {
		t.Fatalf("rekey: %+v", st)
	}
	if again, err := both.Rekey(ctx); err != nil || len(again.Rewritten) != 0 || again.Current == 0 {
		t.Fatalf("second rekey: %+v %v", again, err)
	}
	checkRekeyed(t, onlyNew, want)
	onlyOld := store.New(b, store.Options{Keyring: TestKeyring(t, 1), SnapshotCache: -1})
	if _, err := onlyOld.Load(ctx, store.LoadRequest{Thread: "ea"}); !errors.Is(err, store.ErrNoKey) {
		t.Fatalf("old key alone after rekey: %v, want ErrNoKey", err)
	}
}

// checkRekeyed reads everything of the fixture with the new key alone.
func checkRekeyed(t *testing.T, onlyNew *store.Engine, want map[string]string) {
	ctx := context.Background()
	for th, w := range want {
		cp, err := onlyNew.Load(ctx, store.LoadRequest{Thread: th})
		if err != nil || cp.State.String() != w {
			t.Fatalf("%s with the new key alone after rekey: %v", th, err)
		}
		if ws, err := onlyNew.Writes(ctx, th, "", 4); err != nil || len(ws) != 1 || string(ws[0].Update) != `{"count":99}` {
			t.Fatalf("writes of %s after rekey: %v %v", th, ws, err)
		}
	}
	rl, _ := store.RunLogOf(onlyNew)
	if r, err := rl.Run(ctx, "run1"); err != nil || string(r.Data) != `{"input":"secret"}` {
		t.Fatalf("run after rekey: %+v %v", r, err)
	}
	if evs, err := rl.Events(ctx, "run1", 0, 0); err != nil || len(evs) != 2 || string(evs[1].Data) != `{"e":2}` {
		t.Fatalf("events after rekey: %v %v", evs, err)
	}
	is, _ := store.ItemsOf(onlyNew)
	if it, err := is.Get(ctx, store.GetOp{Tenant: "other", Namespace: []string{"notes"}, Key: "k"}); err != nil || it.Value["text"] != "secret of other" {
		t.Fatalf("item after rekey: %+v %v", it, err)
	}
}
