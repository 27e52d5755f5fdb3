package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// TestVacuumWhileWriting vacuums while four threads append: every append
// commits (the writers wait for the vacuum, then go on), and every state
// loads afterwards.
func TestVacuumWhileWriting(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "v.db"))
	defer s.Close()
	schema := state.MustSchema()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			doc, head := state.EmptyDoc(), int64(0)
			for i := range 40 {
				next, patch, _ := schema.Apply(doc, state.Update{"n": i})
				cp, err := s.Append(ctx, store.Checkpoint{Thread: fmt.Sprint("w", w), Parent: head, Patch: patch, State: next})
				if err != nil {
					errs <- err
					return
				}
				doc, head = next, cp.Seq
			}
		}()
	}
	for range 3 {
		if err := s.(*store.Engine).Backend().(*sqlite.Backend).Vacuum(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range 4 {
		cp, err := s.Load(ctx, store.LoadRequest{Thread: fmt.Sprint("w", w)})
		if err != nil || cp.Seq != 40 || cp.State.String() != `{"n":39}` {
			t.Fatalf("thread w%d: %v %v %s", w, cp.Seq, err, cp.State.String())
		}
	}
}
