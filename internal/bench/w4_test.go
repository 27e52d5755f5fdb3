package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/store"
)

// TestW4 creates 300 threads through the Go API and makes W4's calls
// against the bench's server process, on SQLite and (with
// CAIRN_TEST_POSTGRES) PostgreSQL; every call's answer is checked by the
// bench, and every figure W4 names is there.
func TestW4(t *testing.T) {
	stores := []struct{ name, url string }{{"sqlite", ""}}
	if os.Getenv(pgtest.Env) != "" {
		dsn, _ := pgtest.Schema(t, "bench_w4")
		stores = append(stores, struct{ name, url string }{"postgres", dsn})
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			res, err := RunW4(context.Background(), W4Config{Threads: 300, Repeat: 2, Store: st.url, Program: testProgram})
			if err != nil {
				t.Fatal(err)
			}
			if res.Workload != "w4" || res.Threads != 300 || res.Paused != 3 || res.Repeat != 2 || res.Sampled < 10 || res.ThreadsPerSec <= 0 || res.ServerPeakRSSBytes <= 0 {
				t.Errorf("result %+v", res)
			}
			items := map[string]int{"search user": 1, "search newest": 10, "search offset": 0, "count": 300, "interrupts": 3, "cli threads": 20}
			if len(res.Calls) != len(items) {
				t.Fatalf("calls %+v", res.Calls)
			}
			for _, c := range res.Calls {
				if c.Items != items[c.Name] || c.MedianMS <= 0 || c.P90MS < c.MedianMS || c.FirstMS <= 0 {
					t.Errorf("call %+v", c)
				}
				// The handler runs within each call.
				if (c.Via == "http") != (c.ServerMedianMS > 0) || c.ServerMedianMS > c.MedianMS {
					t.Errorf("call %s via %s: server median %.2f ms, client %.2f ms", c.Name, c.Via, c.ServerMedianMS, c.MedianMS)
				}
			}
			if b := res.Bytes; b == nil || b.DatabaseBytes <= 0 || b.CheckpointBytes <= 0 || res.BytesPerThread != float64(b.DatabaseBytes)/300 {
				t.Errorf("store bytes %+v", b)
			}
			// The store holds the threads now: W4 refuses to run on it again.
			if st.url != "" {
				if _, err := RunW4(context.Background(), W4Config{Threads: 10, Store: st.url, Program: testProgram}); !errors.Is(err, store.ErrConflict) {
					t.Errorf("a second W4 on the same store: %v", err)
				}
			}
		})
	}
	if _, err := RunW4(context.Background(), W4Config{Threads: -1}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("negative threads: %v", err)
	}
}

// W4's checks fail on wrong answers.
func TestW4Checks(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	created := make([]int64, 2000)
	for i := range created {
		created[i] = now.Add(time.Duration(i) * time.Millisecond).UnixMicro()
	}
	w := newW4Run(W4Config{Threads: 2000}, "", nil, created)
	at := func(i int) string { return time.UnixMicro(created[i]).UTC().Format("2006-01-02T15:04:05.000000Z07:00") }
	list := func(from int) []w4Thread {
		var out []w4Thread
		for i := from; i > from-10; i-- {
			out = append(out, w4Thread{ThreadID: w4ThreadID(i), CreatedAt: at(i), Metadata: map[string]any{"user": w4User(i)}})
		}
		return out
	}
	if err := w.checkNewest(list(1999)); err != nil {
		t.Fatalf("the newest: %v", err)
	}
	if err := w.checkOffset(list(999)); err != nil {
		t.Fatalf("from the 1001st newest: %v", err)
	}
	swapped := list(1999)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	u7 := []w4Thread{{ThreadID: w4ThreadID(7), Metadata: map[string]any{"user": "u7"}}, {ThreadID: w4ThreadID(8), Metadata: map[string]any{"user": "u8"}}}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"newest: older threads", w.checkNewest(list(1500))},
		{"newest: out of order", w.checkNewest(swapped)},
		{"newest: too few", w.checkNewest(list(1999)[:9])},
		{"offset: the newest", w.checkOffset(list(1999))},
		{"user: another user", w.checkUser(u7)},
		{"user: too few", w.checkUser(u7[:1])},
	} {
		if !errors.Is(tc.err, ErrCheck) {
			t.Errorf("%s: %v", tc.name, tc.err)
		}
	}
}

// W4 refuses a store that holds threads.
func TestW4NonEmpty(t *testing.T) {
	url := "sqlite:" + filepath.Join(t.TempDir(), "w4.db")
	s, err := store.Open(context.Background(), url, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateThread(context.Background(), store.Thread{ID: "other"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := RunW4(context.Background(), W4Config{Threads: 10, Store: url, Program: testProgram}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("err %v", err)
	}
}

// W4 on a store named by a path relative to the working directory
// measures its tables too (`cairn --store sqlite:w4.db bench w4`).
func TestW4RelativeStorePath(t *testing.T) {
	t.Chdir(t.TempDir())
	res, err := RunW4(context.Background(), W4Config{Threads: 10, Repeat: 1, Store: "sqlite:w4.db", Program: testProgram})
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes == nil || res.Bytes.DatabaseBytes <= 0 || len(res.Bytes.Tables) == 0 {
		t.Fatalf("store bytes %+v", res.Bytes)
	}
}

// A call the server fails (504, its request timeout) is in the result
// with its error, the other calls are still made, and W4 fails.
func TestW4ServerFails(t *testing.T) {
	res, err := RunW4(context.Background(), W4Config{Threads: 120, Repeat: 2, Program: faultyProgram("POST /threads/count")})
	if !errors.Is(err, ErrCallFailed) {
		t.Fatalf("err %v", err)
	}
	if len(res.Calls) != 6 || res.Bytes == nil {
		t.Fatalf("result %+v", res)
	}
	for _, c := range res.Calls {
		if (c.Name == "count") != (c.Error != "") || (c.Error == "" && c.ServerMedianMS > c.MedianMS) {
			t.Errorf("call %+v", c)
		}
	}
}
