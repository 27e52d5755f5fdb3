package bench

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// BenchmarkW1Engine runs W1 threads of 1000 steps through the flow runner
// and through the plain store loop, on memory and on SQLite, reporting
// µs/step. runner/store on SQLite is the runner's overhead.
func BenchmarkW1Engine(b *testing.B) {
	const steps = 1000
	schema := state.MustSchema(schemaOpts...)
	g, err := w1Graph(schema, steps)
	if err != nil {
		b.Fatal(err)
	}
	for _, backend := range []string{"memory", "sqlite"} {
		for _, engine := range []string{"store", "runner"} {
			b.Run(backend+"/"+engine, func(b *testing.B) {
				var s store.Store
				if backend == "memory" {
					s = inmem.Open(store.Options{})
				} else {
					var err error
					if s, err = sqlite.OpenStore(context.Background(), filepath.Join(b.TempDir(), "b.db"), sqlite.Options{}, store.Options{}); err != nil {
						b.Fatal(err)
					}
				}
				defer s.Close()
				ctx := context.Background()
				start := time.Now()
				for i := 0; b.Loop(); i++ {
					thread := strconv.Itoa(i)
					if engine == "runner" {
						err = runThreadFlow(ctx, s, g, flow.Options{Durability: flow.DurabilitySync}, nil, thread, steps, nil)
					} else {
						err = runThreadStore(ctx, s, schema, thread, steps, nil)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N*steps), "µs/step")
			})
		}
	}
}

func TestRunW1Small(t *testing.T) {
	for _, engine := range []string{"runner", "store"} {
		prof := filepath.Join(t.TempDir(), "heap")
		res, err := Run(context.Background(), Config{Workload: "w1", Steps: 40, Engine: engine, Store: "memory:", MemProfile: prof})
		if err != nil {
			t.Fatal(err)
		}
		if res.CheckpointRows != 41 || res.HistoryItems != 41 || res.Engine != engine {
			t.Fatalf("%s: %+v", engine, res)
		}
		// Every step was timed: the first and last tenth and the median.
		if res.USFirst10 <= 0 || res.USLast10 <= 0 || res.USMedian <= 0 {
			t.Fatalf("%s: steps untimed: %+v", engine, res)
		}
		if res.USP99 < res.USMedian || res.USMax < res.USP99 {
			t.Fatalf("%s: median %.1f, p99 %.1f, max %.1f µs out of order", engine, res.USMedian, res.USP99, res.USMax)
		}
		for _, f := range []string{prof, prof + ".reads"} {
			if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
				t.Fatalf("%s: heap profile %s: %v", engine, f, err)
			}
		}
	}
	if _, err := Run(context.Background(), Config{Workload: "w1", Engine: "nope", Store: "memory:"}); err == nil {
		t.Fatal("unknown engine accepted")
	}
	if Content("7", 12) != "t7-step-12-"+string(make([]byte, 0))+repeatX(200-len("t7-step-12-")) || len(Content("0", 1)) != 200 {
		t.Fatal("content")
	}
}

func repeatX(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

// W2 against a shared server store: the concurrent half must find the
// threads gone.
func TestRunW2Postgres(t *testing.T) {
	if os.Getenv(pgtest.Env) == "" {
		t.Skip("CAIRN_TEST_POSTGRES is not set")
	}
	dsn, _ := pgtest.Schema(t, "cairn_bench_w2")
	u, _ := url.Parse(dsn)
	ctx := context.Background()
	res, err := Run(ctx, Config{Workload: "w2", Threads: 3, Steps: 5, Store: u.String()})
	if err != nil {
		t.Fatal(err)
	}
	if res.CheckpointRows != 18 || res.Concurrent == nil || res.Concurrent.CheckpointRows != 18 {
		t.Fatalf("w2 on postgres: %+v", res)
	}
}

// W1 through Runner.Stream commits the same steps and reports its modes.
func TestStreamWorkload(t *testing.T) {
	for _, modes := range [][]flow.StreamMode{{flow.StreamValues}, {flow.StreamUpdates, flow.StreamCheckpoints}} {
		res, err := Run(context.Background(), Config{Workload: "w1", Steps: 20, Store: "memory:", Stream: modes})
		if err != nil {
			t.Fatal(err)
		}
		if res.CheckpointRows != 21 || res.Stream != joinModes(modes) {
			t.Fatalf("%v: %d rows, stream %q", modes, res.CheckpointRows, res.Stream)
		}
	}
}

func TestQuantileUS(t *testing.T) {
	ds := []time.Duration{5 * time.Microsecond, time.Microsecond, 3 * time.Microsecond, 2 * time.Microsecond, 4 * time.Microsecond}
	for _, tc := range []struct {
		q    float64
		want float64
	}{{0, 1}, {0.5, 3}, {0.99, 5}, {1, 5}} {
		if got := quantileUS(ds, tc.q); got != tc.want {
			t.Errorf("quantile %.2f = %.1f, want %.1f", tc.q, got, tc.want)
		}
	}
	if got := quantileUS(nil, 0.5); got != 0 {
		t.Errorf("quantile of nothing = %.1f", got)
	}
}

// TestSQLiteFloor: the three floors run their commits (past the bounded
// one's WAL size, so its checkpoints run) and report a cost.
func TestSQLiteFloor(t *testing.T) {
	dir := t.TempDir()
	f, err := SQLiteFloor(context.Background(), dir, sqlite.DurabilitySync, 2*sqlite.DefaultWALPages)
	if err != nil {
		t.Fatal(err)
	}
	if f.Plain <= 0 || f.Prepared <= 0 || f.Bounded <= 0 {
		t.Fatalf("floors %+v", f)
	}
}
