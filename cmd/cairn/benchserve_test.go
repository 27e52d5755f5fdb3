package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/internal/bench"
)

// TestBenchServe: the hidden bench-serve command serves the chat
// assistant in a process of its own, and cairn bench w3 --url drives it
// (the same client as against the bench's own server or the LangGraph JS
// peer), as JSON and as a table.
func TestBenchServe(t *testing.T) {
	url := "sqlite:" + filepath.Join(t.TempDir(), "w3.db")
	proc := cairnProcess(t, nil, bench.ServeCommand, "--store", url, "--addr", "127.0.0.1:0")
	out, err := proc.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "listening http://127.0.0.1:") {
		_ = proc.Process.Kill()
		t.Fatalf("bench-serve printed %q", sc.Text())
	}
	base := strings.TrimPrefix(sc.Text(), "listening ")
	defer func() {
		// The test binary's cairn has no signal handler (main's): the
		// signal ends it. internal/bench tests the graceful stop.
		_ = proc.Process.Signal(syscall.SIGTERM)
		_ = proc.Wait()
	}()

	code, stdout, stderr := cli(t, nil, "bench", "w3", "--url", base, "--turns", "5", "--series", "wait", "--json")
	if code != 0 {
		t.Fatalf("bench w3 --url: %d %s", code, stderr)
	}
	var res bench.W3Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Workload != "w3" || res.URL != base || len(res.Series) != 1 {
		t.Fatalf("bench w3 --json: %v %s", err, stdout)
	}
	if s := res.Series[0]; s.Series != "wait" || s.StateMessages != 10 || s.Connections != 1 || s.Latency == nil || s.Bytes != nil {
		t.Fatalf("series %+v", s)
	}
	code, stdout, stderr = cli(t, nil, "bench", "w3", "--url", base, "--turns", "3", "--series", "stream")
	if code != 0 || !strings.Contains(stdout, "w3 stream") || !strings.Contains(stdout, "the state has 6 messages") {
		t.Fatalf("bench w3 table: %d %s %s", code, stdout, stderr)
	}
	// The server timed each turn's handler.
	res2, err := http.Get(base + "/__bench/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer res2.Body.Close()
	var st bench.ServerStats
	if err := json.NewDecoder(res2.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, q := range st.Requests {
		if q.Route == "POST /threads/{thread_id}/runs/wait" {
			n++
		}
	}
	if n != 5 || st.PeakRSSBytes <= 0 {
		t.Fatalf("stats: %d waits timed, peak RSS %d", n, st.PeakRSSBytes)
	}
}

func TestBenchServerFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "w3", "--series", "poll"},
		{"bench", "w3", "--turns", "-1"},
		{"bench", "w3", "--pid", "5"},
		{"bench", "w4", "--url", "http://127.0.0.1:1"},
		{"bench", "w4", "--threads", "-2"},
		{bench.ServeCommand, "--addr", "127.0.0.1:0"},
	} {
		if code, _, stderr := cli(t, nil, args...); code != 2 {
			t.Errorf("%q: exit %d, %s", args, code, stderr)
		}
	}
}

// Under go test the bench refuses to start its server from the test
// binary (which would run the tests again) instead of forking them.
func TestBenchInTestBinary(t *testing.T) {
	for _, w := range []string{"w3", "w4"} {
		code, _, stderr := cli(t, nil, "bench", w, "--turns", "2", "--threads", "2")
		if code != 1 || !strings.Contains(stderr, "a test binary is not") {
			t.Errorf("%s: exit %d, %s", w, code, stderr)
		}
	}
}
