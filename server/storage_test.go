package server_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/store/storetest"
)

// TestThreadStorage asks GET /threads/{id}/storage where a thread's bytes
// go after two runs (one stopped at an interrupt, one resuming it), on
// SQLite, encrypted SQLite and memory, and checks the answer against what
// the store holds: the checkpoints the history lists, the runs and their
// event logs as stored, the channels of the graph's state, and totals that
// add up.
func TestThreadStorage(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) *store.Engine
	}{
		{"sqlite", func(t *testing.T) *store.Engine { return openSQLite(t, store.Options{}) }},
		{"sqlite-encrypted", func(t *testing.T) *store.Engine {
			return openSQLite(t, store.Options{Keyring: storetest.TestKeyring(t, 7)})
		}},
		{"memory", func(*testing.T) *store.Engine { return inmem.Open(store.Options{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.open(t)
			var calls atomic.Int64
			ts := newServer(t, s, approvalGraph(t, &calls, 0))
			ts.json("POST", "/threads", map[string]any{"thread_id": "s1"}, 200)
			ts.json("POST", "/threads/s1/runs/wait", map[string]any{"assistant_id": "drafts", "input": map[string]any{}}, 200)
			ts.json("POST", "/threads/s1/runs/wait", map[string]any{"assistant_id": "drafts", "command": map[string]any{"resume": true}}, 200)
			code, b := ts.do("GET", "/threads/s1/storage", nil)
			var got store.ThreadStorage
			if code != 200 || json.Unmarshal(b, &got) != nil {
				t.Fatalf("GET storage: %d %s", code, b)
			}
			checkStorageAnswer(t, ts, s, got)
			for path, want := range map[string]int{"/threads/nope/storage": 404, "/threads/bad%20id/storage": 422} {
				if code, b := ts.do("GET", path, nil); code != want {
					t.Errorf("GET %s: %d %s, want %d", path, code, b, want)
				}
			}
		})
	}
}

func openSQLite(t *testing.T, opts store.Options) *store.Engine {
	t.Helper()
	s, err := sqlite.OpenStore(context.Background(), filepath.Join(t.TempDir(), "s.db"), sqlite.Options{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func checkStorageAnswer(t *testing.T, ts *testServer, s *store.Engine, got store.ThreadStorage) {
	t.Helper()
	ctx := context.Background()
	var history []any // the stored checkpoints: not the input views the API shows before a run's first
	for _, h := range ts.json("POST", "/threads/s1/history", map[string]any{"limit": 1000}, 200)["list"].([]any) {
		if _, view := h.(map[string]any)["metadata"].(map[string]any)["cairn"].(map[string]any)["input_of"]; !view {
			history = append(history, h)
		}
	}
	c := got.Checkpoints
	if got.ThreadID != "s1" || c.Count != int64(len(history)) || c.Snapshots < 1 || c.PatchBytes+c.MetadataBytes != c.Bytes || c.MetadataBytes == 0 {
		t.Fatalf("checkpoints %+v (history: %d)", c, len(history))
	}
	if len(got.Namespaces) != 1 || got.Namespaces[0].Namespace != "" || got.Namespaces[0].Checkpoints != c {
		t.Fatalf("namespaces %+v", got.Namespaces)
	}
	var patch, snap int64
	for field, u := range got.Channels {
		if field != "drafts" && field != "approved" {
			t.Errorf("channel %q is no field of the graph's state", field)
		}
		patch += u.Bytes
		snap += u.SnapshotBytes
	}
	if got.Channels["drafts"].Bytes == 0 || got.Channels["approved"].Bytes == 0 || patch+got.Unattributed.Bytes != c.PatchBytes || snap+got.Unattributed.SnapshotBytes != c.SnapshotBytes {
		t.Fatalf("channels %+v, unattributed %+v, checkpoints %+v", got.Channels, got.Unattributed, c)
	}
	// The runs and their logs, as stored (sealed, when encrypted).
	rl := s.Backend().(store.RunLog)
	runs, err := rl.Runs(ctx, store.RunQuery{Thread: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	var want store.ThreadStorage
	for _, r := range runs {
		want.Runs = store.StoredRows{Count: want.Runs.Count + 1, Bytes: want.Runs.Bytes + int64(len(r.Data))}
		evs, err := rl.Events(ctx, r.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			want.RunEvents = store.StoredRows{Count: want.RunEvents.Count + 1, Bytes: want.RunEvents.Bytes + int64(len(ev.Data))}
		}
	}
	if len(runs) != 2 || got.Runs != want.Runs || got.RunEvents != want.RunEvents || want.RunEvents.Count == 0 {
		t.Fatalf("runs %+v, events %+v; the store holds %d runs: %+v, %+v", got.Runs, got.RunEvents, len(runs), want.Runs, want.RunEvents)
	}
	if total := c.Bytes + c.SnapshotBytes + got.PendingWrites.Bytes + got.Runs.Bytes + got.RunEvents.Bytes; got.TotalBytes != total {
		t.Fatalf("total %d, want %d", got.TotalBytes, total)
	}
}

// TestThreadStorageUnsupported: a store whose backend cannot measure
// answers 501, as LangGraph's server does with a custom checkpointer.
func TestThreadStorageUnsupported(t *testing.T) {
	b := inmem.New()
	type noMeasure struct {
		driver.Backend
		store.RunLog
	}
	s := store.New(noMeasure{b, b}, store.Options{})
	var calls atomic.Int64
	ts := newServer(t, s, approvalGraph(t, &calls, 0))
	ts.json("POST", "/threads", map[string]any{"thread_id": "s1"}, 200)
	if code, b := ts.do("GET", "/threads/s1/storage", nil); code != 501 {
		t.Fatalf("GET storage: %d %s, want 501", code, b)
	}
	if code, _ := ts.do("GET", "/threads/nope/storage", nil); code != 404 {
		t.Fatalf("a missing thread: %d, want 404", code)
	}
}
