package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

func testPrune(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h)
	m := newModel(t, s, "prune")
	for i := 1; i <= 300; i++ {
		m.step(i)
	}
	other := newModel(t, s, "prune-other")
	for i := 1; i <= 5; i++ {
		other.step(i)
	}
	res, err := s.Prune(ctx, store.PruneRequest{Thread: "prune", KeepLast: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Checkpoints == 0 || res.Threads != 1 {
		t.Fatalf("prune = %+v", res)
	}
	var oldest int64
	n := 0
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: "prune", WithState: true}) {
		if err != nil {
			t.Fatal(err)
		}
		if cp.State.String() != m.want[cp.Seq] {
			t.Fatalf("seq %d wrong after prune", cp.Seq)
		}
		oldest = cp.Seq
		n++
	}
	if n != 10 || int64(n) != 300-res.Checkpoints || oldest != res.Checkpoints+1 {
		t.Fatalf("after prune: %d left, oldest %d, deleted %d", n, oldest, res.Checkpoints)
	}
	m.step(301)
	m.checkLoad(0)
	other.checkLoad(1)
	if _, err := s.Prune(ctx, store.PruneRequest{Thread: "missing"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("prune missing: %v", err)
	}
	if _, err := s.Prune(ctx, store.PruneRequest{KeepLast: 2}); err != nil {
		t.Fatal(err)
	}
	other.checkLoad(0)
}
