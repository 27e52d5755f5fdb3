package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	_ "github.com/cairn-dev/cairn/store/postgres"
	_ "github.com/cairn-dev/cairn/store/sqlite"
)

// fillBundleThread writes a thread with what a bundle carries: a long
// root namespace with snapshots, a branch, an interrupted head, a second
// namespace, pending writes, external ids, thread metadata, and two runs
// with events (one referring to a checkpoint).
func fillBundleThread(t testing.TB, s store.Store, key string) {
	t.Helper()
	ctx := context.Background()
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages), state.WithField("notes", "append"))
	doc := state.EmptyDoc()
	var head int64
	var docs []state.Doc
	for i := range 40 {
		next, patch, err := schema.Apply(doc, state.Update{
			"messages": state.Message{ID: fmt.Sprint("m", i), Content: strings.Repeat(fmt.Sprint("word ", i, " "), 20)},
			"count":    i,
		})
		if err != nil {
			t.Fatal(err)
		}
		cp := store.Checkpoint{Thread: key, Parent: head, Nodes: []string{"reply"}, Patch: patch, State: next, Meta: store.Meta{Source: "loop", Next: []string{fmt.Sprint("n", i)}}}
		if i%7 == 3 {
			cp.ExternalID = fmt.Sprint("ext-", i)
		}
		if i == 39 {
			cp.Status = store.StatusInterrupted
		}
		got, err := s.Append(ctx, cp)
		if err != nil {
			t.Fatal(err)
		}
		doc, head = next, got.Seq
		docs = append(docs, next)
	}
	// A branch: a fork within the thread from seq 10 is the new head.
	if _, err := s.Fork(ctx, store.ForkRequest{Thread: key, At: 10}); err != nil {
		t.Fatal(err)
	}
	ns := "gate1"
	var gh int64
	for i := range 5 {
		next, patch, err := schema.Apply(docs[i], state.Update{"notes": fmt.Sprint("note ", i)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Append(ctx, store.Checkpoint{Thread: key, Namespace: ns, Parent: gh, Patch: patch, State: next})
		if err != nil {
			t.Fatal(err)
		}
		gh = got.Seq
	}
	if err := s.PutWrites(ctx, key, "", 5, []store.Write{{Task: "a", Node: "n1", Update: json.RawMessage(`{"x":1}`)}, {Task: "b", Node: "n2", Update: json.RawMessage(`{"token":"[REDACTED]"}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutWrites(ctx, key, ns, gh, []store.Write{{Task: "g", Node: "gate", Update: json.RawMessage(`[1,2]`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetMetadata(ctx, key, map[string]any{"owner": "ann", "n": 3, "nested": map[string]any{"k": []any{1, "two"}}}); err != nil {
		t.Fatal(err)
	}
	rl, err := store.RunLogOf(s)
	if err != nil {
		t.Fatal(err)
	}
	tenant, id := store.SplitThreadKey(key)
	for i, runID := range []string{"0b6f6a4e-0000-4000-8000-00000000000" + fmt.Sprint(1+len(key)%8), "0b6f6a4e-0000-4000-8000-0000000000a" + fmt.Sprint(len(key)%8)} {
		data := fmt.Sprintf(`{"assistant_id":"agent","thread_id":%q,"run_id":%q,"n":%d}`, id, runID, i)
		if err := rl.PutRun(ctx, store.RunRecord{ID: runID, Thread: key, Tenant: tenant, Status: "success", CreatedAt: int64(1000 + i), UpdatedAt: int64(2000 + i), Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
		evs := []store.EventRecord{
			{Seq: 1, Attempt: 1, Data: []byte(fmt.Sprintf(`{"event":"metadata","data":{"run_id":%q,"thread_id":%q}}`, runID, id))},
			{Seq: 2, Attempt: 1, Ref: &store.EventRef{Namespace: "", Seq: 12}, Data: []byte(`{"event":"values"}`)},
		}
		if err := rl.AppendEvents(ctx, runID, evs); err != nil {
			t.Fatal(err)
		}
	}
}

// dumpThread is everything a user can read of a thread, as text: its
// metadata and creation time, every checkpoint of every namespace (seq,
// parent, status, time, nodes, metadata, patch, state, external id), its
// pending writes, its runs and their events. Run ids are listed in order
// and named by position, so that a renamed import compares equal.
func dumpThread(t testing.TB, s store.Store, key string) string {
	t.Helper()
	ctx := context.Background()
	var sb strings.Builder
	th, err := s.Thread(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := json.Marshal(th.Metadata)
	fmt.Fprintf(&sb, "thread created %d head %d status %v metadata %s\n", th.CreatedAt.UnixNano(), th.Head, th.Status, md)
	nss, err := s.Namespaces(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss {
		for cp, err := range s.History(ctx, store.HistoryRequest{Thread: key, Namespace: ns.Name, WithState: true}) {
			if err != nil {
				t.Fatal(err)
			}
			meta, _ := json.Marshal(cp.Meta)
			patch, _ := json.Marshal(cp.Patch)
			fmt.Fprintf(&sb, "ns %q seq %d parent %d status %v at %d nodes %v ext %q meta %s patch %s state %s\n",
				cp.Namespace, cp.Seq, cp.Parent, cp.Status, cp.CreatedAt.UnixNano(), cp.Nodes, cp.ExternalID, meta, patch, cp.State.AppendJSON(nil))
			ws, err := s.Writes(ctx, key, ns.Name, cp.Seq)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				fmt.Fprintf(&sb, "  write %s %s %s\n", w.Task, w.Node, w.Update)
			}
		}
	}
	rl, err := store.RunLogOf(s)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := rl.Runs(ctx, store.RunQuery{Thread: key})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		fmt.Fprintf(&sb, "run %s %d %d %d\n", r.Status, r.CreatedAt, r.UpdatedAt, len(r.Data))
		evs, err := rl.Events(ctx, r.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			fmt.Fprintf(&sb, "  event %d attempt %d ref %v %d\n", ev.Seq, ev.Attempt, ev.Ref, len(ev.Data))
		}
	}
	return sb.String()
}

// bundleStores opens the stores a round trip goes through: memory,
// SQLite (one key), PostgreSQL (another key) when CAIRN_TEST_POSTGRES is
// set, SQLite again without a key.
func bundleStores(t *testing.T) []store.Store {
	t.Helper()
	ctx := context.Background()
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	ring := func(k []byte) *store.Keyring {
		r, err := store.NewKeyring(k)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	open := func(url string, opts store.Options) store.Store {
		s, err := store.Open(ctx, url, store.OpenOptions{Store: opts})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	dir := t.TempDir()
	out := []store.Store{
		inmem.Open(store.Options{MinSnapshotBytes: 512}),
		open("sqlite:"+filepath.Join(dir, "a.db"), store.Options{Keyring: ring(k1)}),
	}
	if os.Getenv(pgtest.Env) != "" {
		dsn, _ := pgtest.Schema(t, "bundle")
		out = append(out, open(dsn, store.Options{Keyring: ring(k2)}))
	}
	return append(out, open("sqlite:"+filepath.Join(dir, "b.db"), store.Options{}))
}

// TestBundleRoundTrip: memory → SQLite (encrypted) → PostgreSQL
// (encrypted, another key) → SQLite, each hop exported and imported:
// every checkpoint's state, metadata, parent, status and time, the
// pending writes, the thread's metadata and the runs with their events
// read the same at every hop.
func TestBundleRoundTrip(t *testing.T) {
	ctx := context.Background()
	stores := bundleStores(t)
	const key = "acme/th-1"
	fillBundleThread(t, stores[0], key)
	want := dumpThread(t, stores[0], key)
	for i := 1; i < len(stores); i++ {
		var buf bytes.Buffer
		if _, err := store.ExportBundle(ctx, stores[i-1], key, &buf); err != nil {
			t.Fatal(err)
		}
		info, err := store.ImportBundle(ctx, stores[i], bytes.NewReader(buf.Bytes()), store.ImportOptions{Tenant: "acme"})
		if err != nil {
			t.Fatalf("hop %d: %v", i, err)
		}
		if info.Thread != key || info.Checkpoints != 46 || info.Runs != 2 || info.Events != 4 || info.Writes != 3 {
			t.Fatalf("hop %d: %+v", i, info)
		}
		if got := dumpThread(t, stores[i], key); got != want {
			t.Fatalf("hop %d differs:\n%s\nwant:\n%s", i, got, want)
		}
	}
}
