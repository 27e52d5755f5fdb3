package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

// testRunLog checks the run log an HTTP server keeps: runs put, replaced,
// listed newest first by tenant, thread and status, their event logs
// appended in order with taken seqs refused, and everything deleted with
// the run or with its thread.
func testRunLog(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := context.Background()
	rl, err := store.RunLogOf(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range []string{"t1", "t2"} {
		if _, err := s.CreateThread(ctx, store.Thread{ID: th, Tenant: "acme"}); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range []struct{ id, thread, tenant, status string }{
		{"r1", "t1", "acme", "success"}, {"r2", "t1", "acme", "running"}, {"r3", "t2", "acme", "pending"}, {"r4", "t2", "other", "running"},
	} {
		rec := store.RunRecord{ID: r.id, Thread: r.thread, Tenant: r.tenant, Status: r.status, CreatedAt: int64(i + 1), UpdatedAt: int64(i + 1), Data: []byte(`{"n":` + fmt.Sprint(i) + `}`)}
		if err := rl.PutRun(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	checkRuns(t, rl, store.RunQuery{Tenant: "acme"}, "r3", "r2", "r1")
	checkRuns(t, rl, store.RunQuery{Thread: "t1"}, "r2", "r1")
	checkRuns(t, rl, store.RunQuery{Status: []string{"pending", "running"}}, "r4", "r3", "r2")
	checkRuns(t, rl, store.RunQuery{Tenant: "acme", Limit: 1, Offset: 1}, "r2")
	// Replacing a run keeps its id and changes the rest.
	if err := rl.PutRun(ctx, store.RunRecord{ID: "r2", Thread: "t1", Tenant: "acme", Status: "success", CreatedAt: 2, UpdatedAt: 9, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if got, err := rl.Run(ctx, "r2"); err != nil || got.Status != "success" || got.UpdatedAt != 9 || string(got.Data) != "{}" {
		t.Fatalf("r2 after replace: %+v, %v", got, err)
	}
	if _, err := rl.Run(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing run: %v", err)
	}
	checkEvents(t, rl)
	// Deleting a thread deletes its runs and their logs.
	if err := s.DeleteThread(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	checkRuns(t, rl, store.RunQuery{Thread: "t1"})
	if _, err := rl.Events(ctx, "r1", 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("events of a deleted thread's run: %v", err)
	}
	if err := rl.DeleteRun(ctx, "r3"); err != nil {
		t.Fatal(err)
	}
	if err := rl.DeleteRun(ctx, "r3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting twice: %v", err)
	}
	if err := rl.PutRun(ctx, store.RunRecord{ID: "bad id!", Thread: "t2", Status: "pending", Data: []byte(`{}`)}); !errors.Is(err, store.ErrInvalidID) {
		t.Fatalf("bad run id: %v", err)
	}
}

func checkEvents(t *testing.T, rl store.RunLog) {
	ctx := context.Background()
	evs := []store.EventRecord{{Seq: 1, Data: []byte(`"a"`)}, {Seq: 2, Data: []byte(`"b"`)}}
	if err := rl.AppendEvents(ctx, "r1", evs); err != nil {
		t.Fatal(err)
	}
	if err := rl.AppendEvents(ctx, "r1", []store.EventRecord{{Seq: 3, Data: []byte(`"c"`)}, {Seq: 2, Data: []byte(`"x"`)}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a taken seq: %v", err)
	}
	got, err := rl.Events(ctx, "r1", 1, 0)
	if err != nil || len(got) != 1 || got[0].Seq != 2 || string(got[0].Data) != `"b"` {
		t.Fatalf("events after 1 (the refused batch must leave nothing): %+v, %v", got, err)
	}
	if got, err := rl.Events(ctx, "r1", 0, 1); err != nil || len(got) != 1 || got[0].Seq != 1 {
		t.Fatalf("first event: %+v, %v", got, err)
	}
	if _, err := rl.Events(ctx, "nope", 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("events of a missing run: %v", err)
	}
	if err := rl.AppendEvents(ctx, "nope", evs); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("appending to a missing run: %v", err)
	}
}

func checkRuns(t *testing.T, rl store.RunLog, q store.RunQuery, want ...string) {
	t.Helper()
	got, err := rl.Runs(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("runs %+v: %v, want %v", q, ids, want)
	}
}

// testSetMetadata replaces a thread's metadata and keeps the rest.
func testSetMetadata(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := context.Background()
	if _, err := s.CreateThread(ctx, store.Thread{ID: "m", Tenant: "acme", Metadata: map[string]any{"a": "1"}}); err != nil {
		t.Fatal(err)
	}
	th, err := s.SetMetadata(ctx, "m", map[string]any{"b": true})
	if err != nil || th.Tenant != "acme" || fmt.Sprint(th.Metadata) != "map[b:true]" {
		t.Fatalf("set: %+v, %v", th, err)
	}
	if th, err = s.Thread(ctx, "m"); err != nil || fmt.Sprint(th.Metadata) != "map[b:true]" {
		t.Fatalf("read back: %+v, %v", th, err)
	}
	if _, err := s.SetMetadata(ctx, "none", nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing thread: %v", err)
	}
}

// testKeys checks the API key store: put, read back, list by tenant,
// taken ids refused, revoke.
func testKeys(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := context.Background()
	ks, err := store.KeysOf(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []store.KeyRecord{{ID: "k2", Tenant: "b", Name: "ci", Hash: []byte{2}, CreatedAt: 2}, {ID: "k1", Tenant: "a", Hash: []byte{1}, CreatedAt: 1}} {
		if err := ks.PutKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := ks.PutKey(ctx, store.KeyRecord{ID: "k1", Tenant: "b", Hash: []byte{9}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("taken id: %v", err)
	}
	if k, err := ks.Key(ctx, "k2"); err != nil || k.Tenant != "b" || k.Name != "ci" || string(k.Hash) != "\x02" || k.CreatedAt != 2 {
		t.Fatalf("k2: %+v, %v", k, err)
	}
	all, err := ks.Keys(ctx, "")
	if err != nil || len(all) != 2 || all[0].ID != "k1" {
		t.Fatalf("all keys: %+v, %v", all, err)
	}
	if bs, err := ks.Keys(ctx, "b"); err != nil || len(bs) != 1 || bs[0].ID != "k2" {
		t.Fatalf("tenant b: %+v, %v", bs, err)
	}
	if err := ks.DeleteKey(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Key(ctx, "k1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoked key: %v", err)
	}
	if err := ks.DeleteKey(ctx, "k1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoking twice: %v", err)
	}
	if err := ks.PutKey(ctx, store.KeyRecord{ID: "k3", Tenant: "a"}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("a key without a hash: %v", err)
	}
}
