package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

// TestStorageCommand: cairn storage THREAD draws where the bytes of W1's
// thread go, with a run and its event log and a pending write beside the
// checkpoints; --json prints what the store reports (the object GET
// /threads/{id}/storage answers); a missing thread exits 1, a bad call 2,
// and the store is left as it was.
func TestStorageCommand(t *testing.T) {
	url := seeded(t)
	ctx := context.Background()
	s, err := store.Open(ctx, url, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rl, err := store.RunLogOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.PutRun(ctx, store.RunRecord{ID: "r1", Thread: "0", Status: "success", CreatedAt: 1, UpdatedAt: 1, Data: []byte(`{"assistant_id":"w1"}`)}); err != nil {
		t.Fatal(err)
	}
	var evs []store.EventRecord
	for i := range 3 {
		evs = append(evs, store.EventRecord{Seq: int64(i + 1), Data: fmt.Appendf(nil, `{"event":"values","data":{"count":%d}}`, i)})
	}
	if err := rl.AppendEvents(ctx, "r1", evs); err != nil {
		t.Fatal(err)
	}
	if err := s.PutWrites(ctx, "0", "", 31, []store.Write{{Task: "step:0", Node: "step", Update: json.RawMessage(`{"count":31}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CAIRN_STORE": url}
	code, out, errOut := cli(t, env, "storage", "0")
	if code != 0 {
		t.Fatalf("storage: %d %s", code, errOut)
	}
	for _, want := range []string{"thread 0: ", "STORED", "checkpoints     31", "  patches", "  metadata", "snapshots", "pending writes  1", "runs            1", "run events      3",
		"CHANNEL", "messages", "count", "NAMESPACE", "-          31"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = cli(t, env, "storage", "0", "--json")
	var got store.ThreadStorage
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("storage --json: %d %s %s", code, out, errOut)
	}
	r, err := store.Open(ctx, url, store.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want, err := store.ThreadStorageOf(ctx, r, "0")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || got.Checkpoints.Count != 31 || got.Runs.Count != 1 || got.RunEvents.Count != 3 || got.PendingWrites.Count != 1 {
		t.Fatalf("--json printed %+v, the store reports %+v", got, want)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"storage", "ghost"}, 1, `not found: thread "ghost"`},
		{[]string{"storage", "no spaces"}, 2, `thread id "no spaces"`},
		{[]string{"storage"}, 2, "accepts 1 arg"},
		{[]string{"storage", "0", "1"}, 2, "accepts 1 arg"},
		{[]string{"storage", "0", "--store", "sqlite:" + filepath.Join(t.TempDir(), "none.db")}, 1, "no store at"},
	} {
		if code, _, errOut := cli(t, env, tc.args...); code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit %d with %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
