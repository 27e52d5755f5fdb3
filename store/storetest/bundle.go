package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

// testBundle: a branched thread's bundle, before and after a prune,
// imported into the same store under new ids gives the same checkpoints
// with the same states, parents, statuses and pending writes; importing it
// under its own id is ErrConflict and leaves the thread as it was.
func testBundle(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	if _, err := s.CreateThread(ctx, store.Thread{ID: "acme/orig", Metadata: map[string]any{"kind": "agent"}}); err != nil {
		t.Fatal(err)
	}
	m := branchedThread(t, s, "acme/orig")
	for _, tc := range []struct {
		name, as string
		prune    bool
	}{{"whole", "imported", false}, {"pruned", "imported-pruned", true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prune {
				if _, err := s.Prune(ctx, store.PruneRequest{Thread: "acme/orig", KeepLast: 2}); err != nil {
					t.Fatal(err)
				}
			}
			var buf bytes.Buffer
			if _, err := store.ExportBundle(ctx, s, "acme/orig", &buf); err != nil {
				t.Fatal(err)
			}
			if _, err := store.ImportBundle(ctx, s, bytes.NewReader(buf.Bytes()), store.ImportOptions{Tenant: "acme"}); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("import over the source: %v", err)
			}
			info, err := store.ImportBundle(ctx, s, bytes.NewReader(buf.Bytes()), store.ImportOptions{Tenant: "acme", As: tc.as})
			if err != nil {
				t.Fatal(err)
			}
			th, err := s.Thread(ctx, info.Thread)
			if err != nil || th.Tenant != "acme" || th.Head != 60 || fmt.Sprint(th.Metadata) != "map[kind:agent]" {
				t.Fatalf("imported thread = %+v, %v", th, err)
			}
			if got, want := checkAll(t, s, m, info.Thread), checkAll(t, s, m, "acme/orig"); !slices.Equal(got, want) {
				t.Fatalf("the import has %v, the source %v", got, want)
			}
			if got, want := bundleHistory(t, s, info.Thread), bundleHistory(t, s, "acme/orig"); got != want {
				t.Fatalf("histories differ:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// bundleHistory lists a thread's checkpoints (seq, parent, status, time,
// snapshot placement aside) and their pending writes.
func bundleHistory(t *testing.T, s store.Store, thread string) string {
	t.Helper()
	var b bytes.Buffer
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: thread}) {
		if err != nil {
			t.Fatal(err)
		}
		ws, err := s.Writes(context.Background(), thread, "", cp.Seq)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%d %d %v %d %v %v %+v\n", cp.Seq, cp.Parent, cp.Status, cp.CreatedAt.UnixNano(), cp.Nodes, cp.Patch, ws)
	}
	return b.String()
}
