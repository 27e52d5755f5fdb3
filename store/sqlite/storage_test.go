package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite/sqlitetest"
)

// TestThreadStorageOlderFormats: a store of an older format, opened
// read-only, reports a thread's checkpoints as the same store does once
// migrated (formats before 5 key rows by thread, namespace and seq); a
// format before 3 has no runs tables, so no runs.
func TestThreadStorageOlderFormats(t *testing.T) {
	ctx := context.Background()
	for _, format := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint("format ", format), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			writeLanes(t, path)
			s := openAt(t, path)
			if err := s.PutWrites(ctx, "a", "sub:1", 7, []store.Write{{Task: "t:0", Node: "n", Update: json.RawMessage(`{"sub":8}`)}}); err != nil {
				t.Fatal(err)
			}
			rl, err := store.RunLogOf(s)
			if err != nil {
				t.Fatal(err)
			}
			if err := rl.PutRun(ctx, store.RunRecord{ID: "r", Thread: "a", Status: "success", Data: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			if err := rl.AppendEvents(ctx, "r", []store.EventRecord{{Seq: 1, Data: []byte(`{"e":1}`)}}); err != nil {
				t.Fatal(err)
			}
			want, err := store.ThreadStorageOf(ctx, s, "a")
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if want.Checkpoints.Count != 37 || len(want.Namespaces) != 2 || want.PendingWrites.Count != 1 || want.Runs.Count != 1 || want.RunEvents.Count != 1 {
				t.Fatalf("the current format's report: %+v", want)
			}
			if format < 3 {
				want.TotalBytes -= want.Runs.Bytes + want.RunEvents.Bytes
				want.Runs, want.RunEvents = store.StoredRows{}, store.StoredRows{}
			}
			sqlitetest.Downgrade(t, path, format)
			readOnlyAt(t, path, format, func(ro store.Store) {
				got, err := store.ThreadStorageOf(ctx, ro, "a")
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("format %d read-only: %+v, %v\nwant %+v", format, got, err, want)
				}
			})
		})
	}
}
