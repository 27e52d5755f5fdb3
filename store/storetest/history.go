package storetest

import (
	"context"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

func testHistoryPagination(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "pages")
	for i := 1; i <= 53; i++ {
		m.step(i)
	}
	for _, tc := range []struct {
		req   store.HistoryRequest
		first int64
		n     int
	}{
		{store.HistoryRequest{Thread: "pages", PageSize: 7}, 53, 53},
		{store.HistoryRequest{Thread: "pages", PageSize: 7, WithState: true}, 53, 53},
		{store.HistoryRequest{Thread: "pages", Before: 20, PageSize: 5, WithState: true}, 19, 19},
		{store.HistoryRequest{Thread: "pages", Limit: 10, PageSize: 3}, 53, 10},
		{store.HistoryRequest{Thread: "pages", Before: 1}, 0, 0},
	} {
		var seqs []int64
		for cp, err := range s.History(ctx, tc.req) {
			if err != nil {
				t.Fatal(err)
			}
			if tc.req.WithState != cp.HasState {
				t.Fatalf("HasState = %v", cp.HasState)
			}
			if tc.req.WithState && cp.State.String() != m.want[cp.Seq] {
				t.Fatalf("seq %d: wrong state", cp.Seq)
			}
			seqs = append(seqs, cp.Seq)
		}
		if len(seqs) != tc.n || (tc.n > 0 && seqs[0] != tc.first) {
			t.Fatalf("%+v: got %d items starting %v", tc.req, len(seqs), seqs[:min(3, len(seqs))])
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]-1 {
				t.Fatalf("not newest first: %v", seqs)
			}
		}
	}
	// Stopping early is allowed.
	for range s.History(ctx, store.HistoryRequest{Thread: "pages"}) {
		break
	}
}

func testEveryCheckpointRebuilds(t *testing.T, h Harness) {
	s := open(t, h)
	m := newModel(t, s, "rebuild")
	for i := 1; i <= 400; i++ {
		m.step(i)
	}
	settle(s)
	snapshots := 0
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: "rebuild", WithState: true, PageSize: 64}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.State.String() != m.want[cp.Seq] {
			t.Fatalf("seq %d: wrong state", cp.Seq)
		}
		if cp.Snapshot {
			snapshots++
		}
	}
	// Snapshots grow with the state: more than one, far fewer than rows.
	if snapshots < 2 || snapshots > 60 {
		t.Fatalf("%d snapshots in 400 checkpoints", snapshots)
	}
	for _, seq := range []int64{1, 2, 199, 200, 201, 399, 400} {
		m.checkLoad(seq)
	}
}
