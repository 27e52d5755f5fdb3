package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// TestListingScale measures the store's side of workload W4 (docs/
// benchmarks.md) at the thread counts CAIRN_LISTING_SCALE lists
// ("10000,100000,1000000"; unset, the test is skipped): T threads, thread i
// with metadata {"user": "u<i mod 1000>"} and one checkpoint, every 100th
// paused at an interrupt, written through the store's own calls. It logs
// the median and 90th percentile of each listing call, with and without
// reading the heads of the page (what the server adds to show them), and
// the bytes a thread costs. CAIRN_LISTING_DIR keeps the stores between
// runs (they take minutes to write at a million threads).
func TestListingScale(t *testing.T) {
	scales := os.Getenv("CAIRN_LISTING_SCALE")
	if scales == "" {
		t.Skip("CAIRN_LISTING_SCALE is not set")
	}
	dir := os.Getenv("CAIRN_LISTING_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	for _, f := range strings.Split(scales, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1000 {
			t.Fatalf("CAIRN_LISTING_SCALE: %q", f)
		}
		path := filepath.Join(dir, fmt.Sprintf("listing-%d.db", n))
		s := scaleStore(t, path, n)
		fi, _ := os.Stat(path)
		t.Logf("T=%d: %d bytes, %.0f bytes a thread", n, fi.Size(), float64(fi.Size())/float64(n))
		for _, c := range scaleCalls() {
			t.Logf("T=%d %-44s %s", n, c.name, measure(t, s, c.fn))
		}
		s.Close()
	}
}

// scaleStore opens the store of n threads at path, writing it first when
// it does not hold them.
func scaleStore(t *testing.T, path string, n int) store.Store {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.OpenStore(context.Background(), path, sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	have, err := s.CountThreads(ctx, store.ThreadSearch{})
	if err != nil {
		t.Fatal(err)
	}
	if have == int64(n) {
		return s
	}
	if have != 0 {
		t.Fatalf("%s holds %d threads, not %d: remove it", path, have, n)
	}
	start := time.Now()
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if err := writeScaleThread(ctx, s, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	t.Logf("T=%d: written in %s (%.0f µs a thread)", n, time.Since(start).Round(time.Second), float64(time.Since(start).Microseconds())/float64(n))
	return s
}

// writeScaleThread writes thread i of the W4 store: created with its
// metadata, one checkpoint (a turn), and an interrupt for every 100th.
func writeScaleThread(ctx context.Context, s store.Store, i int) error {
	id := fmt.Sprintf("thread-%07d", i)
	if _, err := s.CreateThread(ctx, store.Thread{ID: id, Metadata: map[string]any{"user": fmt.Sprintf("u%d", i%1000)}}); err != nil {
		return err
	}
	d, p, err := state.MustSchema().Apply(state.EmptyDoc(), state.Update{"messages": fmt.Sprintf("turn of %s", id)})
	if err != nil {
		return err
	}
	if _, err := s.Append(ctx, store.Checkpoint{Thread: id, Patch: p, State: d, Meta: store.Meta{Source: "loop"}}); err != nil {
		return err
	}
	if i%100 == 0 {
		_, err = s.Append(ctx, store.Checkpoint{Thread: id, Parent: 1, State: d, Status: store.StatusInterrupted,
			Meta: store.Meta{Source: "interrupt", StopReason: "interrupt", StepOf: 1, Interrupt: []byte(`{"question":"send?"}`)}})
	}
	return err
}

type scaleCall struct {
	name string
	fn   func(context.Context, store.Store) (int, error)
}

// list is a listing call that reads heads heads of its page (the server
// shows each thread's values).
func list(search store.ThreadSearch, heads bool) func(context.Context, store.Store) (int, error) {
	return func(ctx context.Context, s store.Store) (int, error) {
		ths, err := s.ListThreads(ctx, search)
		if err != nil || !heads {
			return len(ths), err
		}
		for _, th := range ths {
			if _, err := s.Load(ctx, store.LoadRequest{Thread: th.ID}); err != nil {
				return 0, err
			}
		}
		return len(ths), nil
	}
}

// withCount is a listing with the count of its filters (X-Pagination-Total).
func withCount(search store.ThreadSearch, heads bool) func(context.Context, store.Store) (int, error) {
	l := list(search, heads)
	return func(ctx context.Context, s store.Store) (int, error) {
		if _, err := s.CountThreads(ctx, search); err != nil {
			return 0, err
		}
		return l(ctx, s)
	}
}

func count(search store.ThreadSearch) func(context.Context, store.Store) (int, error) {
	return func(ctx context.Context, s store.Store) (int, error) {
		n, err := s.CountThreads(ctx, search)
		return int(n), err
	}
}

// scaleCalls are W4's calls as the store answers them, then other orders
// and filters for docs/server.md.
func scaleCalls() []scaleCall {
	u7 := map[string]any{"user": "u7"}
	paused := []store.ThreadStatus{store.ThreadInterrupted}
	return []scaleCall{
		{"search user=u7 limit 10 (+count)", withCount(store.ThreadSearch{Metadata: u7, Desc: true, Limit: 10}, false)},
		{"  … with its 10 heads", withCount(store.ThreadSearch{Metadata: u7, Desc: true, Limit: 10}, true)},
		{"search limit 10 (+count)", withCount(store.ThreadSearch{Desc: true, Limit: 10}, false)},
		{"  … with its 10 heads", withCount(store.ThreadSearch{Desc: true, Limit: 10}, true)},
		{"search limit 10 offset 1000 (+count)", withCount(store.ThreadSearch{Desc: true, Offset: 1000, Limit: 10}, false)},
		{"  … with its 10 heads", withCount(store.ThreadSearch{Desc: true, Offset: 1000, Limit: 10}, true)},
		{"count", count(store.ThreadSearch{})},
		{"pending interrupts limit 50", list(store.ThreadSearch{Status: paused, Sort: store.SortStatusAt, Limit: 50}, false)},
		{"  … with its 50 heads", list(store.ThreadSearch{Status: paused, Sort: store.SortStatusAt, Limit: 50}, true)},
		{"threads by id limit 20 (cairn threads)", func(ctx context.Context, s store.Store) (int, error) {
			n := 0
			for _, err := range s.Threads(ctx, store.ThreadFilter{Limit: 20}) {
				if err != nil {
					return 0, err
				}
				n++
			}
			return n, nil
		}},
		{"by update time limit 10", list(store.ThreadSearch{Sort: store.SortUpdated, Desc: true, Limit: 10}, false)},
		{"by id limit 10 offset 1000", list(store.ThreadSearch{Sort: store.SortID, Offset: 1000, Limit: 10}, false)},
		{"by status limit 10", list(store.ThreadSearch{Sort: store.SortStatus, Desc: true, Limit: 10}, false)},
		{"status interrupted limit 10", list(store.ThreadSearch{Status: paused, Desc: true, Limit: 10}, false)},
		{"status idle limit 10", list(store.ThreadSearch{Status: []store.ThreadStatus{store.ThreadIdle}, Desc: true, Limit: 10}, false)},
		{"user=u7, interrupted limit 10", list(store.ThreadSearch{Metadata: u7, Status: paused, Desc: true, Limit: 10}, false)},
		{"user=u7 by update time limit 10", list(store.ThreadSearch{Metadata: u7, Sort: store.SortUpdated, Desc: true, Limit: 10}, false)},
		{"user absent limit 10", list(store.ThreadSearch{Metadata: map[string]any{"user": nil}, Desc: true, Limit: 10}, false)},
		{"count user=u7", count(store.ThreadSearch{Metadata: u7})},
		{"count interrupted", count(store.ThreadSearch{Status: paused})},
		{"count user=u7, interrupted", count(store.ThreadSearch{Metadata: u7, Status: paused})},
	}
}

// measure runs a call (warm: twice first) and reports its median and
// 90th percentile over 31 runs.
func measure(t *testing.T, s store.Store, fn func(context.Context, store.Store) (int, error)) string {
	t.Helper()
	ctx := context.Background()
	var n int
	var times []time.Duration
	for i := 0; i < 33; i++ {
		start := time.Now()
		var err error
		if n, err = fn(ctx, s); err != nil {
			t.Fatal(err)
		}
		if i >= 2 {
			times = append(times, time.Since(start))
		}
	}
	slices.Sort(times)
	return fmt.Sprintf("median %8.3f ms  p90 %8.3f ms  (%d threads)", ms(times[len(times)/2]), ms(times[len(times)*9/10]), n)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
