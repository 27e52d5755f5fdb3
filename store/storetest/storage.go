package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// storageFixture is a thread whose every stored byte the test knows from
// the backend's raw rows: a root namespace of rows that each change one
// field (or none, or the whole state), a namespace of more rows than a
// page with one row that changes several fields and has metadata, a
// namespace with pending writes only, runs with event logs, and another
// thread whose rows must not count.
type storageFixture struct {
	t *testing.T
	s *store.Engine
	// By thread and namespace (thread "\x00" ns): the patch appended at
	// each seq, the head state and seq, and the seq of the one row with
	// metadata.
	patches  map[string]map[int64]state.Patch
	docs     map[string]state.Doc
	heads    map[string]int64
	withMeta map[string]int64
}

// noise is n bytes of text that S2 cannot compress much, so a field's
// share of a compressed row is close to its share of the encoding.
func noise(seed string, n int) string {
	var out []byte
	sum := sha256.Sum256([]byte(seed))
	for len(out) < n {
		out = hex.AppendEncode(out, sum[:])
		sum = sha256.Sum256(sum[:])
	}
	return string(out[:n])
}

func (f *storageFixture) append(thread, ns string, upd state.Update, p state.Patch, nodes []string, meta store.Meta) {
	f.t.Helper()
	key := thread + "\x00" + ns
	doc := f.docs[key]
	var err error
	if upd != nil {
		if doc, p, err = schema.Apply(doc, upd, state.ApplyOptions{NewID: func() string { return "id" }}); err != nil {
			f.t.Fatal(err)
		}
	}
	cp, err := f.s.Append(context.Background(), store.Checkpoint{Thread: thread, Namespace: ns, Parent: f.heads[key], Patch: p, State: doc, Nodes: nodes, Meta: meta})
	if err != nil {
		f.t.Fatal(err)
	}
	f.docs[key], f.heads[key] = doc, cp.Seq
	if f.patches[key] == nil {
		f.patches[key] = map[int64]state.Patch{}
	}
	f.patches[key][cp.Seq] = p
	if len(nodes) > 0 || meta.Source != "" {
		if f.withMeta[key] != 0 {
			f.t.Fatalf("a second row with metadata in %q", key)
		}
		f.withMeta[key] = cp.Seq
	}
}

func newStorageFixture(t *testing.T, h Harness) *storageFixture {
	t.Helper()
	ctx := context.Background()
	s, ok := open(t, h).(*store.Engine)
	if !ok {
		t.Skip("the storage report is the engine's")
	}
	f := &storageFixture{t: t, s: s, patches: map[string]map[int64]state.Patch{}, docs: map[string]state.Doc{}, heads: map[string]int64{}, withMeta: map[string]int64{}}
	for _, th := range []string{"st", "st-other"} {
		if _, err := s.CreateThread(ctx, store.Thread{ID: th, Tenant: "acme"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 {
		if i%3 == 2 {
			f.append("st", "", state.Update{"count": i}, nil, nil, store.Meta{})
			continue
		}
		f.append("st", "", state.Update{"messages": state.Message{ID: fmt.Sprint("m", i), Role: "user", Content: noise(fmt.Sprint(i), 700)}}, nil, nil, store.Meta{})
	}
	whole, _ := json.Marshal(f.docs["st\x00"])
	f.append("st", "", nil, state.Patch{}, nil, store.Meta{})
	f.append("st", "", nil, state.Patch{{Op: state.OpReplace, Path: "", Value: whole}}, nil, store.Meta{})
	for i := range 270 {
		if i == 100 {
			f.append("st", "sub", state.Update{"messages": state.Message{ID: "s", Content: noise("s", 300)}, "count": i, "kv": map[string]any{"k": noise("k", 40)}},
				nil, []string{"n1", "n2"}, store.Meta{Source: "loop", Next: []string{"n1"}})
			continue
		}
		f.append("st", "sub", state.Update{"count": i}, nil, nil, store.Meta{})
	}
	f.append("st-other", "", state.Update{"messages": state.Message{ID: "o", Content: noise("o", 900)}}, nil, []string{"x"}, store.Meta{})
	for _, w := range []struct {
		thread, ns string
		seq        int64
		tasks      []string
	}{{"st", "", 12, []string{"a:0", "b:1"}}, {"st", "sub", 3, []string{"c:0"}}, {"st", "waiting", 1, []string{"d:0", "e:1", "f:2"}}, {"st-other", "", 1, []string{"g:0"}}} {
		var ws []store.Write
		for i, task := range w.tasks {
			ws = append(ws, store.Write{Task: task, Node: "n", Update: json.RawMessage(fmt.Sprintf(`{"count":%d,"note":%q}`, i, noise(task, 20*(i+1))))})
		}
		if err := s.PutWrites(ctx, w.thread, w.ns, w.seq, ws); err != nil {
			t.Fatal(err)
		}
	}
	f.runs()
	settle(s)
	return f
}

// runs records runs with event logs: two on the thread, one on the other.
func (f *storageFixture) runs() {
	f.t.Helper()
	ctx := context.Background()
	rl, err := store.RunLogOf(f.s)
	if err != nil {
		f.t.Fatal(err)
	}
	for i, r := range []struct {
		id, thread string
		events     int
	}{{"sr1", "st", 3}, {"sr2", "st", 2}, {"sr3", "st-other", 4}} {
		if err := rl.PutRun(ctx, store.RunRecord{ID: r.id, Thread: r.thread, Tenant: "acme", Status: "success", CreatedAt: int64(i + 1), UpdatedAt: int64(i + 1), Data: []byte(`{"run":"` + noise(r.id, 50) + `"}`)}); err != nil {
			f.t.Fatal(err)
		}
		var evs []store.EventRecord
		for seq := 1; seq <= r.events; seq++ {
			evs = append(evs, store.EventRecord{Seq: int64(seq), Data: []byte(`{"values":"` + noise(fmt.Sprint(r.id, seq), 30*seq) + `"}`)})
		}
		if err := rl.AppendEvents(ctx, r.id, evs); err != nil {
			f.t.Fatal(err)
		}
	}
}

// expected is a namespace's report computed from the backend's raw rows:
// exact counts and bytes, and each field's share of the patch and
// snapshot bytes up to rounding (slack: how far rounding may move one).
type expected struct {
	ns        store.NamespaceStorage
	channels  map[string][2]float64 // field → patch, snapshot bytes
	slack     float64
	encrypted bool
}

// expect reads a namespace's raw rows. meta is the metadata bytes the
// report gives: in an encrypted store a row's metadata is sealed in its
// patch column, so the one row of the namespace with metadata is taken
// to have that many.
func (f *storageFixture) expect(thread, ns string, meta int64) expected {
	f.t.Helper()
	ctx := context.Background()
	rows, err := f.s.Backend().Rows(ctx, driver.RowQuery{Thread: thread, Namespace: ns, Snapshots: true})
	if err != nil {
		f.t.Fatal(err)
	}
	x := expected{ns: store.NamespaceStorage{Namespace: ns}, channels: map[string][2]float64{}}
	c := &x.ns.Checkpoints
	key := thread + "\x00" + ns
	for i := range rows {
		r := &rows[i]
		c.Count++
		c.Bytes += int64(len(r.Meta) + len(r.Patch))
		c.MetadataBytes += int64(len(r.Meta))
		c.PatchBytes = c.Bytes - c.MetadataBytes // what the raw columns say: metadata sealed in the patch is patch here
		rowMeta := float64(len(r.Meta))
		if f.withMeta[key] == r.Seq && len(r.Meta) == 0 {
			x.encrypted, rowMeta = true, float64(meta)
		}
		p := f.patches[key][r.Seq]
		if len(p) > 1 {
			x.slack += float64(len(p)) // a share of several is rounded
		}
		x.spread(float64(len(r.Meta)+len(r.Patch))-rowMeta, state.EncodePatch(nil, p), state.PatchFieldBytes, 0)
		if r.HasSnapshot {
			c.Snapshots++
			c.SnapshotBytes += int64(len(r.Snapshot))
			cp, err := f.s.Load(ctx, store.LoadRequest{Thread: thread, Namespace: ns, Seq: r.Seq})
			if err != nil {
				f.t.Fatal(err)
			}
			if cp.State.Len() > 1 {
				x.slack += float64(cp.State.Len())
			}
			x.spread(float64(len(r.Snapshot)), state.EncodeDoc(nil, cp.State), state.DocFieldBytes, 1)
		}
	}
	return x
}

// spread shares stored bytes out among the fields of an encoding, as the
// report does (up to rounding).
func (x *expected) spread(stored float64, enc []byte, fields func([]byte, func(string, int)) error, col int) {
	sizes := map[string]float64{}
	var total float64
	if err := fields(enc, func(f string, n int) { sizes[f] += float64(n); total += float64(n) }); err != nil {
		panic(err)
	}
	if total == 0 {
		sizes, total = map[string]float64{"": 1}, 1
	}
	for f, n := range sizes {
		v := x.channels[f]
		v[col] += stored * n / total
		x.channels[f] = v
	}
}

func testStorage(t *testing.T, h Harness) {
	f := newStorageFixture(t, h)
	ctx := context.Background()
	got, err := store.ThreadStorageOf(ctx, f.s, "st")
	if err != nil {
		t.Fatal(err)
	}
	if got.ThreadID != "st" || len(got.Namespaces) != 3 || got.Namespaces[0].Namespace != "" || got.Namespaces[1].Namespace != "sub" || got.Namespaces[2].Namespace != "waiting" {
		t.Fatalf("namespaces %+v", got.Namespaces)
	}
	for i, ns := range []string{"", "sub", "waiting"} {
		t.Run("ns="+ns, func(t *testing.T) { f.checkNamespace(t, "st", got.Namespaces[i]) })
	}
	f.checkTotals(t, got)
	f.checkSide(t, got)
	// The root namespace's rows change one field each (or none): every
	// byte is attributed exactly.
	root := got.Namespaces[0]
	if root.Channels["messages"].Bytes == 0 || root.Channels["count"].Bytes == 0 || root.Unattributed.Bytes == 0 || root.Channels["kv"] != (store.ChannelUsage{}) {
		t.Fatalf("root channels %+v, unattributed %+v", root.Channels, root.Unattributed)
	}
	// A thread of its own: one row, one snapshot of one field.
	other, err := store.ThreadStorageOf(ctx, f.s, "st-other")
	if err != nil {
		t.Fatal(err)
	}
	if c := other.Checkpoints; c.Count != 1 || c.Snapshots != 1 || other.Channels["messages"].SnapshotBytes != c.SnapshotBytes || other.Runs.Count != 1 || other.RunEvents.Count != 4 || other.PendingWrites.Count != 1 {
		t.Fatalf("the other thread: %+v", other)
	}
	f.checkErrors(t, h)
}

// checkNamespace compares a namespace's report with what the raw rows say.
func (f *storageFixture) checkNamespace(t *testing.T, thread string, got store.NamespaceStorage) {
	t.Helper()
	x := f.expect(thread, got.Namespace, got.Checkpoints.MetadataBytes)
	c, w := got.Checkpoints, x.ns.Checkpoints
	if c.Count != w.Count || c.Bytes != w.Bytes || c.Snapshots != w.Snapshots || c.SnapshotBytes != w.SnapshotBytes || c.PatchBytes+c.MetadataBytes != c.Bytes {
		t.Fatalf("checkpoints %+v, want %+v", c, w)
	}
	switch {
	case x.encrypted && (c.MetadataBytes == 0 || c.MetadataBytes >= c.Bytes):
		t.Fatalf("metadata of an encrypted store: %d of %d bytes", c.MetadataBytes, c.Bytes)
	case !x.encrypted && c.MetadataBytes != w.MetadataBytes:
		t.Fatalf("metadata %d bytes, want %d", c.MetadataBytes, w.MetadataBytes)
	}
	var patch, snap int64
	for field, u := range got.Channels {
		patch += u.Bytes
		snap += u.SnapshotBytes
		if _, ok := x.channels[field]; !ok || field == "" {
			t.Errorf("channel %q: no row changes it", field)
		}
	}
	if patch+got.Unattributed.Bytes != c.PatchBytes || snap+got.Unattributed.SnapshotBytes != c.SnapshotBytes {
		t.Fatalf("channels %+v and unattributed %+v do not add up to %d patch and %d snapshot bytes", got.Channels, got.Unattributed, c.PatchBytes, c.SnapshotBytes)
	}
	for field, want := range x.channels {
		u := got.Channels[field]
		if field == "" {
			u = got.Unattributed
		}
		if math.Abs(float64(u.Bytes)-want[0]) > x.slack || math.Abs(float64(u.SnapshotBytes)-want[1]) > x.slack {
			t.Errorf("field %q: %+v, want %.1f patch and %.1f snapshot bytes (± %.0f)", field, u, want[0], want[1], x.slack)
		}
	}
}

// checkTotals checks that the thread's figures sum its namespaces'.
func (f *storageFixture) checkTotals(t *testing.T, got store.ThreadStorage) {
	t.Helper()
	var c store.CheckpointUsage
	var pw store.StoredRows
	var un store.ChannelUsage
	channels := map[string]store.ChannelUsage{}
	for _, ns := range got.Namespaces {
		n := ns.Checkpoints
		c = store.CheckpointUsage{Count: c.Count + n.Count, Bytes: c.Bytes + n.Bytes, PatchBytes: c.PatchBytes + n.PatchBytes, MetadataBytes: c.MetadataBytes + n.MetadataBytes,
			Snapshots: c.Snapshots + n.Snapshots, SnapshotBytes: c.SnapshotBytes + n.SnapshotBytes}
		pw = store.StoredRows{Count: pw.Count + ns.PendingWrites.Count, Bytes: pw.Bytes + ns.PendingWrites.Bytes}
		un = store.ChannelUsage{Bytes: un.Bytes + ns.Unattributed.Bytes, SnapshotBytes: un.SnapshotBytes + ns.Unattributed.SnapshotBytes}
		for field, u := range ns.Channels {
			channels[field] = store.ChannelUsage{Bytes: channels[field].Bytes + u.Bytes, SnapshotBytes: channels[field].SnapshotBytes + u.SnapshotBytes}
		}
	}
	if got.Checkpoints != c || got.PendingWrites != pw || got.Unattributed != un || fmt.Sprint(got.Channels) != fmt.Sprint(channels) {
		t.Fatalf("totals %+v %+v %+v %v, want the namespaces' sums %+v %+v %+v %v", got.Checkpoints, got.PendingWrites, got.Unattributed, got.Channels, c, pw, un, channels)
	}
	if want := c.Bytes + c.SnapshotBytes + pw.Bytes + got.Runs.Bytes + got.RunEvents.Bytes; got.TotalBytes != want {
		t.Fatalf("total %d bytes, want %d", got.TotalBytes, want)
	}
}

// checkSide checks the pending writes, runs and run events against the
// backend's raw rows: the thread's own, not the other thread's.
func (f *storageFixture) checkSide(t *testing.T, got store.ThreadStorage) {
	t.Helper()
	ctx := context.Background()
	b := f.s.Backend()
	for i, w := range []struct {
		ns  string
		seq int64
	}{{"", 12}, {"sub", 3}, {"waiting", 1}} {
		raw, err := b.Writes(ctx, "st", w.ns, w.seq)
		if err != nil {
			t.Fatal(err)
		}
		want := store.StoredRows{Count: int64(len(raw))}
		for _, x := range raw {
			want.Bytes += int64(len(x.Update))
		}
		if got.Namespaces[i].PendingWrites != want || want.Count == 0 {
			t.Errorf("pending writes of %q: %+v, want %+v", w.ns, got.Namespaces[i].PendingWrites, want)
		}
	}
	rl, ok := b.(store.RunLog)
	if !ok {
		t.Fatalf("%T keeps no run log", b)
	}
	var runs, events store.StoredRows
	for _, id := range []string{"sr1", "sr2"} {
		r, err := rl.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		runs = store.StoredRows{Count: runs.Count + 1, Bytes: runs.Bytes + int64(len(r.Data))}
		evs, err := rl.Events(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			events = store.StoredRows{Count: events.Count + 1, Bytes: events.Bytes + int64(len(ev.Data))}
		}
	}
	if got.Runs != runs || got.RunEvents != events || events.Count != 5 {
		t.Fatalf("runs %+v and events %+v, want %+v and %+v", got.Runs, got.RunEvents, runs, events)
	}
}

// checkErrors: a missing thread, a bad id, a closed store, and stores
// that cannot measure.
func (f *storageFixture) checkErrors(t *testing.T, h Harness) {
	t.Helper()
	ctx := context.Background()
	if _, err := store.ThreadStorageOf(ctx, f.s, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a missing thread: %v", err)
	}
	if _, err := store.ThreadStorageOf(ctx, f.s, "bad id"); !errors.Is(err, store.ErrInvalidID) {
		t.Errorf("a bad id: %v", err)
	}
	empty, err := f.s.CreateThread(ctx, store.Thread{ID: "st-empty"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := store.ThreadStorageOf(ctx, f.s, empty.ID); err != nil || got.TotalBytes != 0 || len(got.Namespaces) != 0 || got.Channels == nil {
		t.Errorf("an empty thread: %+v, %v", got, err)
	}
	type plain struct{ driver.Backend } // a backend that does not measure
	if _, err := store.New(plain{f.s.Backend()}, store.Options{}).ThreadStorage(ctx, "st"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("a backend that does not measure: %v", err)
	}
	type wrapped struct{ store.Store }
	if _, err := store.ThreadStorageOf(ctx, wrapped{f.s}, "st"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("a store that does not report: %v", err)
	}
	s := h.Open(t, store.Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ThreadStorageOf(ctx, s, "st"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("a closed store: %v", err)
	}
}
