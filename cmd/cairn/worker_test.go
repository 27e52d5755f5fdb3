package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
)

// workerProcess is a cairn worker started by a test.
type workerProcess = child

// startWorker starts cairn worker with args and waits until it takes runs.
func startWorker(t *testing.T, args ...string) *workerProcess {
	t.Helper()
	w, _ := startChild(t, cairnProcess(t, nil, append([]string{"worker", "--log-level", "info"}, args...)...), "taking runs of")
	return w
}

// queueSetup starts cairn serve --queue and three workers on a private
// schema; it returns the server, the workers by id and the store URL.
func queueSetup(t *testing.T) (*serveProcess, map[string]*workerProcess, string) {
	t.Helper()
	dsn, _ := pgtest.Schema(t, "cairn_q")
	assistants := filepath.Join("..", "..", "examples", "serve")
	p := startServe(t, "--queue", "--assistants", assistants, "--store", dsn)
	workers := map[string]*workerProcess{}
	for _, id := range []string{"w1", "w2", "w3"} {
		workers[id] = startWorker(t, "--id", id, "--assistants", assistants, "--store", dsn, "--lease", "1s", "--rescue-after", "2s")
	}
	return p, workers, dsn
}

// ownerOf is the worker holding a thread's lease.
func ownerOf(t *testing.T, dsn, thread string) string {
	t.Helper()
	s, err := postgres.OpenStore(context.Background(), dsn, postgres.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ls, err := store.LeasesOf(s)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ls.Lease(context.Background(), thread)
	if err != nil {
		t.Fatal(err)
	}
	return l.Owner
}

// history returns the thread's checkpoints: seq → parent, and how many
// times each node was committed.
func queueHistory(t *testing.T, p *serveProcess, thread string) (map[int64]int64, map[string]int) {
	t.Helper()
	var h []struct {
		Metadata struct {
			Cairn struct {
				Seq     int64    `json:"seq"`
				Parent  int64    `json:"parent"`
				Nodes   []string `json:"nodes"`
				InputOf int64    `json:"input_of"` // an input view, not a stored checkpoint
			} `json:"cairn"`
		} `json:"metadata"`
	}
	// Right after an outage the server may find its pooled connections
	// gone: it answers 503 (store unavailable) until it has new ones.
	var raw json.RawMessage
	for try := 0; p.call(t, "POST", "/threads/"+thread+"/history", map[string]any{"limit": 100}, &raw) == http.StatusServiceUnavailable && try < 50; try++ {
		time.Sleep(100 * time.Millisecond)
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatalf("history of %s: %v: %s", thread, err, raw)
	}
	parents, nodes := map[int64]int64{}, map[string]int{}
	for _, cp := range h {
		if cp.Metadata.Cairn.InputOf != 0 {
			continue
		}
		parents[cp.Metadata.Cairn.Seq] = cp.Metadata.Cairn.Parent
		for _, n := range cp.Metadata.Cairn.Nodes {
			nodes[n]++
		}
	}
	return parents, nodes
}

// startSlowRun queues a slow-steps run and waits until its first step is
// committed; it returns the thread and the run.
func startSlowRun(t *testing.T, p *serveProcess) (string, string) {
	t.Helper()
	var th, run map[string]any
	p.call(t, "POST", "/threads", map[string]any{}, &th)
	tid := th["thread_id"].(string)
	if code := p.call(t, "POST", "/threads/"+tid+"/runs", map[string]any{"assistant_id": "slow-steps", "input": "count"}, &run); code != 200 {
		t.Fatalf("queue a run: %d %v", code, run)
	}
	crashtest.WaitFor(t, 10*time.Second, "the first step", func() bool {
		parents, _ := queueHistory(t, p, tid)
		return len(parents) >= 2
	})
	return tid, run["run_id"].(string)
}

// checkLinear: the thread's history is one line (no fork) and each step
// was committed exactly once.
func checkLinear(t *testing.T, p *serveProcess, thread string) {
	t.Helper()
	parents, nodes := queueHistory(t, p, thread)
	if len(parents) != 4 {
		t.Errorf("%d checkpoints, want the input and 3 steps: %v", len(parents), parents)
	}
	for seq, parent := range parents {
		if parent != seq-1 {
			t.Errorf("checkpoint %d has parent %d: a fork", seq, parent)
		}
	}
	for _, step := range []string{"one", "two", "three"} {
		if nodes[step] != 1 {
			t.Errorf("step %s committed %d times", step, nodes[step])
		}
	}
}

// TestWorkerKilledRunTakenOver: the worker running a queued run is killed
// with SIGKILL mid-step; another worker takes the run over after the
// rescue delay and finishes it from its last checkpoint.
func TestWorkerKilledRunTakenOver(t *testing.T) {
	p, workers, dsn := queueSetup(t)
	tid, rid := startSlowRun(t, p)
	owner := ownerOf(t, dsn, tid)
	w := workers[owner]
	if w == nil {
		t.Fatalf("lease owner %q is none of the workers", owner)
	}
	if err := w.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var final map[string]any
	start := time.Now()
	if code := p.call(t, "GET", "/threads/"+tid+"/runs/"+rid+"/join", nil, &final); code != 200 || final["final_output"] != "three" {
		t.Fatalf("join: %d %v", code, final)
	}
	t.Logf("finished %s after the kill of %s", time.Since(start).Round(time.Millisecond), owner)
	checkLinear(t, p, tid)
	if now := ownerOf(t, dsn, tid); now == owner {
		t.Errorf("the lease is still %s's", owner)
	}
}

// TestWorkerPausedIsFenced: the worker running a queued run is paused
// with SIGSTOP past its lease; another worker takes the run over and
// finishes it; the paused worker, resumed with SIGCONT, finishes its step
// and finds its commit refused: the history has no fork.
func TestWorkerPausedIsFenced(t *testing.T) {
	p, workers, dsn := queueSetup(t)
	tid, rid := startSlowRun(t, p)
	owner := ownerOf(t, dsn, tid)
	w := workers[owner]
	if w == nil {
		t.Fatalf("lease owner %q is none of the workers", owner)
	}
	if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var final map[string]any
	t.Cleanup(func() {
		if t.Failed() { // which worker did what, when the take-over did not happen
			for id, w := range workers {
				t.Logf("worker %s's log ends:\n%s", id, lastLines(w.logText(), 30))
			}
		}
	})
	if code := p.call(t, "GET", "/threads/"+tid+"/runs/"+rid+"/join", nil, &final); code != 200 || final["final_output"] != "three" {
		t.Fatalf("join: %d %v", code, final)
	}
	if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(w.logText(), "taken over by another worker") {
		if time.Now().After(deadline) {
			t.Fatalf("the resumed worker was not fenced; its log:\n%s", w.logText())
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkLinear(t, p, tid)
	var run map[string]any
	p.call(t, "GET", "/threads/"+tid+"/runs/"+rid, nil, &run)
	if run["status"] != "success" {
		t.Fatalf("run %v", run)
	}
	b, _ := json.Marshal(final)
	t.Logf("fenced %s; final %s", owner, b)
	_ = io.Discard
}

// TestWorkerFlags: bad flags and stores are usage errors, before anything
// is opened.
func TestWorkerFlags(t *testing.T) {
	assistants := filepath.Join("..", "..", "examples", "serve")
	sqlite := "sqlite:" + filepath.Join(t.TempDir(), "x.db")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no concurrency", []string{"worker", "--concurrency", "0", "--assistants", assistants, "--store", "postgres://127.0.0.1/x"}},
		{"rescue shorter than the lease", []string{"worker", "--lease", "10s", "--rescue-after", "5s", "--assistants", assistants, "--store", "postgres://127.0.0.1/x"}},
		{"not a folder", []string{"worker", "--assistants", "nope", "--store", "postgres://127.0.0.1/x"}},
		{"a SQLite store", []string{"worker", "--assistants", assistants, "--store", sqlite}},
		{"serve --queue on SQLite", []string{"serve", "--queue", "--assistants", assistants, "--store", sqlite}},
		{"serve --cors malformed", []string{"serve", "--cors", "loopback,ftp://x", "--assistants", assistants, "--store", sqlite}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, _, stderr := cli(t, nil, tc.args...); code != 2 || stderr == "" {
				t.Fatalf("exit %d: %s", code, stderr)
			}
		})
	}
	if _, err := os.Stat(strings.TrimPrefix(sqlite, "sqlite:")); !os.IsNotExist(err) {
		t.Fatalf("a refused command created the store: %v", err)
	}
}

// TestWorkerChaos queues runs of a three-step agent on three workers and
// SIGKILLs a random worker every few hundred milliseconds, restarting it:
// every run completes, no completed step runs again, no thread forks, and
// every final state is the fault-free one. CAIRN_CHAOS_RUNS sets the
// number of runs (default 24; the full battery is 500).
func TestWorkerChaos(t *testing.T) {
	runs := 24
	if n, err := strconv.Atoi(os.Getenv("CAIRN_CHAOS_RUNS")); err == nil && n > 0 {
		runs = n
	}
	dsn, _ := pgtest.Schema(t, "cairn_chaos")
	assistants := filepath.Join("..", "..", "examples", "serve")
	p := startServe(t, "--queue", "--assistants", assistants, "--store", dsn)
	start := func(id string) *workerProcess {
		return startWorker(t, "--id", id, "--assistants", assistants, "--store", dsn, "--lease", "1s", "--rescue-after", "2s", "--concurrency", "20")
	}
	var mu sync.Mutex
	workers := map[string]*workerProcess{"w1": start("w1"), "w2": start("w2"), "w3": start("w3")}
	all := []*workerProcess{workers["w1"], workers["w2"], workers["w3"]}
	threads := make([]string, runs)
	for i := range threads {
		var th, run map[string]any
		p.call(t, "POST", "/threads", map[string]any{}, &th)
		threads[i] = th["thread_id"].(string)
		if code := p.call(t, "POST", "/threads/"+threads[i]+"/runs", map[string]any{"assistant_id": "slow-steps", "input": "count"}, &run); code != 200 {
			t.Fatalf("queue run %d: %d %v", i, code, run)
		}
	}
	stop := make(chan struct{})
	kills := 0
	chaos := make(chan struct{})
	go func() {
		defer close(chaos)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(300+rand.IntN(400)) * time.Millisecond):
			}
			id := []string{"w1", "w2", "w3"}[rand.IntN(3)]
			mu.Lock()
			_ = workers[id].cmd.Process.Kill()
			kills++
			mu.Unlock()
			w := start(id)
			mu.Lock()
			workers[id] = w
			all = append(all, w)
			mu.Unlock()
		}
	}()
	deadline := time.Now().Add(time.Duration(30+runs/5) * time.Second)
	for _, th := range threads {
		for {
			var rs []struct {
				Status string `json:"status"`
			}
			p.call(t, "GET", "/threads/"+th+"/runs", nil, &rs)
			if len(rs) == 1 && rs[0].Status == "success" {
				break
			}
			if len(rs) == 1 && rs[0].Status != "pending" && rs[0].Status != "running" {
				t.Fatalf("thread %s: run %s", th, rs[0].Status)
			}
			if time.Now().After(deadline) {
				t.Fatalf("thread %s: run still %v after the deadline", th, rs)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	close(stop)
	<-chaos
	for _, th := range threads {
		checkLinear(t, p, th)
		var st struct {
			Values struct {
				FinalOutput string            `json:"final_output"`
				Steps       map[string]string `json:"steps"`
			} `json:"values"`
		}
		p.call(t, "GET", "/threads/"+th+"/state", nil, &st)
		if st.Values.FinalOutput != "three" || len(st.Values.Steps) != 3 || st.Values.Steps["two"] != "two" {
			t.Errorf("thread %s: final state %+v", th, st.Values)
		}
	}
	takeovers, fenced := 0, 0
	for _, w := range all {
		takeovers += strings.Count(w.logText(), "its worker went silent")
		fenced += strings.Count(w.logText(), "taken over by another worker")
	}
	t.Logf("%d runs completed; %d workers killed and restarted, %d runs taken over from a silent worker, %d fenced; no step committed twice, no fork", runs, kills, takeovers, fenced)
}

// privatePG is a PostgreSQL server of the test's own (initdb, pg_ctl as
// user postgres on a free port): a test may stop and start it.
type privatePG struct {
	t    *testing.T
	dir  string
	port int
}

// newPrivatePG starts a private server; it needs initdb and pg_ctl, and
// root to run them as postgres (CI has both; elsewhere the test skips).
func newPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	for _, tool := range []string{"initdb", "pg_ctl", "runuser"} {
		needTool(t, tool)
	}
	if os.Getuid() != 0 {
		t.Skip("running PostgreSQL as user postgres needs root")
	}
	dir, err := os.MkdirTemp("", "cairn-pg-")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pg := &privatePG{t: t, dir: dir, port: ln.Addr().(*net.TCPAddr).Port}
	ln.Close()
	if out, err := exec.Command("chown", "postgres", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	if out, err := exec.Command("runuser", "-u", "postgres", "--", "initdb", "-D", filepath.Join(dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v %s", err, out)
	}
	t.Cleanup(func() {
		_ = pg.ctl("-m", "immediate", "stop")
		os.RemoveAll(dir)
	})
	if err := pg.ctl("-w", "start"); err != nil {
		t.Fatal(err)
	}
	return pg
}

func (pg *privatePG) ctl(args ...string) error {
	argv := append([]string{"-u", "postgres", "--", "pg_ctl", "-D", filepath.Join(pg.dir, "data"), "-l", filepath.Join(pg.dir, "log"),
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", pg.port, pg.dir)}, args...)
	if out, err := exec.Command("runuser", argv...).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl %v: %v %s", args, err, out)
	}
	return nil
}

func (pg *privatePG) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", pg.port)
}

// TestWorkerChaosPostgresStops queues runs on three workers while the
// database (a private server) is stopped for 0–2 s at random intervals:
// the runs wait and continue — every run completes, no step is committed
// twice, no thread forks, every final state is the fault-free one.
func TestWorkerChaosPostgresStops(t *testing.T) {
	runs := 12
	if n, err := strconv.Atoi(os.Getenv("CAIRN_CHAOS_RUNS")); err == nil && n > 0 {
		runs = n
	}
	pg := newPrivatePG(t)
	assistants := filepath.Join("..", "..", "examples", "serve")
	p := startServe(t, "--queue", "--assistants", assistants, "--store", pg.dsn())
	for _, id := range []string{"w1", "w2", "w3"} {
		startWorker(t, "--id", id, "--assistants", assistants, "--store", pg.dsn(), "--lease", "1s", "--rescue-after", "2s")
	}
	stop, chaos := make(chan struct{}), make(chan struct{})
	outages := 0
	var chaosErr error // the chaos goroutine's, read once it is done
	go func() {
		defer close(chaos)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(300+rand.IntN(700)) * time.Millisecond):
			}
			if chaosErr = pg.ctl("-m", "immediate", "stop"); chaosErr != nil {
				return
			}
			outages++
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Millisecond)
			if chaosErr = pg.ctl("-w", "start"); chaosErr != nil {
				return
			}
		}
	}()
	// The outages end with the test, however it ends (a failure must not
	// leave the goroutine reporting into a finished test).
	stopChaos := sync.OnceFunc(func() { close(stop); <-chaos })
	t.Cleanup(stopChaos)
	// Runs are queued through the outages, a few every second.
	threads := make([]string, runs)
	for i := range threads {
		threads[i] = queueThroughOutages(t, p, time.Now().Add(30*time.Second))
		time.Sleep(150 * time.Millisecond)
	}
	// The database is away about half the time: under the race detector,
	// with other packages' tests beside it, the runs take minutes.
	waitRuns(t, p, threads, time.Now().Add(300*time.Second))
	stopChaos()
	if chaosErr != nil {
		t.Fatal(chaosErr)
	}
	if outages == 0 {
		t.Fatal("the database never stopped: the test proved nothing")
	}
	for _, th := range threads {
		checkLinear(t, p, th)
	}
	t.Logf("%d runs completed across %d database outages; no step committed twice, no fork", runs, outages)
}

// waitRuns waits until the one run of each thread succeeded, reading
// through outages (an answer that is not JSON is read again).
func waitRuns(t *testing.T, p *serveProcess, threads []string, deadline time.Time) {
	t.Helper()
	type runView struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	for _, th := range threads {
		var rs []runView // the last answer read; an outage's keeps it
		for {
			res, err := http.Get(p.url + "/threads/" + th + "/runs")
			if err == nil {
				var got []runView
				if res.StatusCode == http.StatusOK && json.NewDecoder(res.Body).Decode(&got) == nil {
					rs = got
				}
				res.Body.Close()
			}
			if len(rs) == 1 && rs[0].Status == "success" {
				break
			}
			if len(rs) == 1 && rs[0].Status != "pending" && rs[0].Status != "running" {
				t.Fatalf("thread %s: run %s: %s", th, rs[0].Status, rs[0].Error)
			}
			if time.Now().After(deadline) {
				t.Fatalf("thread %s: run still %v after the deadline (the last answer read)", th, rs)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// queueThroughOutages creates a thread with a queued slow-steps run,
// trying again while the database is away (the server answers 5xx, and
// nothing was created); it returns the thread.
func queueThroughOutages(t *testing.T, p *serveProcess, deadline time.Time) string {
	t.Helper()
	post := func(path, body string) (int, map[string]any) {
		res, err := http.Post(p.url+path, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, nil
		}
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	for time.Now().Before(deadline) {
		code, th := post("/threads", "{}")
		if code != 200 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		id := th["thread_id"].(string)
		for time.Now().Before(deadline) {
			code, run := post("/threads/"+id+"/runs", `{"assistant_id": "slow-steps", "input": "count"}`)
			if code == 200 || code == 409 { // 409: an earlier try queued it, its answer was lost
				return id
			}
			if code > 0 && code < 500 {
				t.Fatalf("queueing a run: %d %v", code, run)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Fatal("could not queue a run through the outages")
	return ""
}

// TestRunQueue: cairn run --queue records and queues a run from the CLI; a
// worker runs it; cairn runs and cairn state show it done. Flags that do
// not go with --queue, and a SQLite store, are usage errors.
func TestRunQueue(t *testing.T) {
	dsn, _ := pgtest.Schema(t, "cairn_rq")
	assistants := filepath.Join("..", "..", "examples", "serve")
	startWorker(t, "--id", "w1", "--assistants", assistants, "--store", dsn, "--lease", "1s", "--rescue-after", "2s")
	code, stdout, stderr := cli(t, nil, "run", filepath.Join(assistants, "five-steps.md"), "--queue", "--input-text", "queued", "--thread", "rq1", "--store", dsn, "--json")
	var q struct {
		Thread string `json:"thread"`
		RunID  string `json:"run_id"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &q) != nil || q.Thread != "rq1" || q.RunID == "" {
		t.Fatalf("run --queue: %d %s %s", code, stdout, stderr)
	}
	crashtest.WaitFor(t, 20*time.Second, "the queued run to finish", func() bool {
		_, out, _ := cli(t, nil, "runs", q.RunID, "--store", dsn, "--json")
		var v runView
		return json.Unmarshal([]byte(out), &v) == nil && v.Status == "success"
	})
	if code, out, _ := cli(t, nil, "state", "rq1", "--store", dsn); code != 0 || !strings.Contains(out, "commits every step") || !strings.Contains(out, "queued") {
		t.Fatalf("state after the queued run: %d\n%s", code, out)
	}
	sqlite := "sqlite:" + filepath.Join(t.TempDir(), "x.db")
	for _, args := range [][]string{
		{"run", filepath.Join(assistants, "five-steps.md"), "--queue", "--store", sqlite},
		{"run", filepath.Join(assistants, "five-steps.md"), "--queue", "--model", "scripted:x.yaml", "--store", dsn},
		{"run", filepath.Join(assistants, "nope.md"), "--queue", "--store", dsn},
	} {
		if code, _, stderr := cli(t, nil, args...); code != 2 {
			t.Errorf("%v: exit %d %s", args, code, stderr)
		}
	}
}

// TestQueuedCancel cancels a queued run nobody has taken (it ends at once,
// and no worker runs it later) and a running one, from the CLI (its worker
// stops it before its next step; the run ends interrupted).
func TestQueuedCancel(t *testing.T) {
	dsn, _ := pgtest.Schema(t, "cairn_qc")
	assistants := filepath.Join("..", "..", "examples", "serve")
	p := startServe(t, "--queue", "--assistants", assistants, "--store", dsn)
	queue := func() (string, string) {
		var th, run map[string]any
		p.call(t, "POST", "/threads", map[string]any{}, &th)
		tid := th["thread_id"].(string)
		p.call(t, "POST", "/threads/"+tid+"/runs", map[string]any{"assistant_id": "slow-steps", "input": "count"}, &run)
		return tid, run["run_id"].(string)
	}
	status := func(tid, rid string) string {
		var run map[string]any
		p.call(t, "GET", "/threads/"+tid+"/runs/"+rid, nil, &run)
		s, _ := run["status"].(string)
		return s
	}
	idle, idleRun := queue()
	if code := p.call(t, "POST", "/threads/"+idle+"/runs/"+idleRun+"/cancel", nil, nil); code != 204 || status(idle, idleRun) != "interrupted" {
		t.Fatalf("cancel a pending run: %d, %s", code, status(idle, idleRun))
	}
	startWorker(t, "--id", "w1", "--assistants", assistants, "--store", dsn, "--lease", "1s", "--rescue-after", "2s")
	busy, busyRun := queue()
	crashtest.WaitFor(t, 10*time.Second, "the first step", func() bool {
		parents, _ := queueHistory(t, p, busy)
		return len(parents) >= 2
	})
	if code, _, stderr := cli(t, nil, "runs", busyRun, "--cancel", "--store", dsn); code != 0 {
		t.Fatalf("cairn runs --cancel: %d %s", code, stderr)
	}
	crashtest.WaitFor(t, 10*time.Second, "the running run to end interrupted", func() bool { return status(busy, busyRun) == "interrupted" })
	parents, _ := queueHistory(t, p, busy)
	time.Sleep(1500 * time.Millisecond)
	if later, _ := queueHistory(t, p, busy); len(later) != len(parents) || len(parents) >= 4 {
		t.Fatalf("the cancelled run went on: %d then %d checkpoints", len(parents), len(later))
	}
	if parents, _ := queueHistory(t, p, idle); len(parents) != 0 || status(idle, idleRun) != "interrupted" {
		t.Fatalf("the run cancelled before any worker took it ran: %d checkpoints, %s", len(parents), status(idle, idleRun))
	}
	if code, _, _ := cli(t, nil, "runs", busyRun, "--cancel", "--store", dsn); code != 1 {
		t.Errorf("cancelling an ended run: exit %d", code)
	}
}

// TestQueuedRetryAndStrategies: a cancelled queued run retried from the CLI
// resumes from its last checkpoint (no step twice, no fork); retrying a
// run that succeeded, or one that is not the thread's newest, is refused;
// multitask_strategy interrupt and rollback with a queue stop the running
// run (rollback also returns its thread to where it began, on a new
// branch) before the new one runs; cancel with action=rollback; GET /queue
// shows what waits and who works.
func TestQueuedRetryAndStrategies(t *testing.T) {
	dsn, _ := pgtest.Schema(t, "cairn_qr")
	assistants := filepath.Join("..", "..", "examples", "serve")
	p := startServe(t, "--queue", "--assistants", assistants, "--store", dsn)
	startWorker(t, "--id", "w1", "--assistants", assistants, "--store", dsn, "--lease", "1s", "--rescue-after", "2s")
	status := func(tid, rid string) string {
		var run map[string]any
		if code := p.call(t, "GET", "/threads/"+tid+"/runs/"+rid, nil, &run); code == 404 {
			return "deleted"
		}
		s, _ := run["status"].(string)
		return s
	}
	queueRun := func(tid string, body map[string]any) string {
		var run map[string]any
		body["assistant_id"], body["input"] = "slow-steps", "count"
		if code := p.call(t, "POST", "/threads/"+tid+"/runs", body, &run); code != 200 {
			t.Fatalf("queue a run: %d %v", code, run)
		}
		return run["run_id"].(string)
	}
	waitStatus := func(tid, rid, want string) {
		t.Helper()
		crashtest.WaitFor(t, 20*time.Second, "run "+rid+" "+want, func() bool { return status(tid, rid) == want })
	}

	t.Run("retry", func(t *testing.T) {
		tid, rid := startSlowRun(t, p)
		var q struct {
			Queued  bool
			Running int
			Workers []struct {
				WorkerID string `json:"worker_id"`
				Threads  int
			}
			Jobs map[string]map[string]int
		}
		if code := p.call(t, "GET", "/queue", nil, &q); code != 200 || !q.Queued || q.Running != 1 || len(q.Workers) != 1 || q.Workers[0].WorkerID != "w1" || q.Jobs["cairn_slow-steps"]["running"] != 1 {
			t.Fatalf("GET /queue while a run runs: %d %+v", code, q)
		}
		if code, _, stderr := cli(t, nil, "runs", rid, "--cancel", "--store", dsn); code != 0 {
			t.Fatalf("cancel: %d %s", code, stderr)
		}
		waitStatus(tid, rid, "interrupted")
		code, _, stderr := cli(t, nil, "runs", rid, "--retry", "--store", dsn)
		if code != 0 || !strings.Contains(stderr, "attempt 2") {
			t.Fatalf("cairn runs --retry: %d %s", code, stderr)
		}
		waitStatus(tid, rid, "success")
		checkLinear(t, p, tid)
		if code, _, _ := cli(t, nil, "runs", rid, "--retry", "--store", dsn); code != 1 {
			t.Errorf("retrying a run that succeeded: exit %d, want 1", code)
		}
		if code, _, _ := cli(t, nil, "runs", rid, "--retry", "--cancel", "--store", dsn); code != 2 {
			t.Errorf("--retry with --cancel: exit %d, want 2", code)
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		tid, first := startSlowRun(t, p)
		second := queueRun(tid, map[string]any{"multitask_strategy": "interrupt"})
		waitStatus(tid, second, "success")
		if st := status(tid, first); st != "interrupted" {
			t.Fatalf("the interrupted run is %s", st)
		}
		if code := p.call(t, "POST", "/threads/"+tid+"/runs/"+first+"/retry", nil, nil); code != 409 {
			t.Errorf("retrying a run that is not the thread's newest: %d, want 409", code)
		}
	})

	t.Run("rollback", func(t *testing.T) {
		tid, first := startSlowRun(t, p)
		waitStatus(tid, first, "success")
		before, _ := queueHistory(t, p, tid)
		second := queueRun(tid, map[string]any{})
		crashtest.WaitFor(t, 10*time.Second, "the second run's first step", func() bool {
			parents, _ := queueHistory(t, p, tid)
			return len(parents) > len(before)
		})
		third := queueRun(tid, map[string]any{"multitask_strategy": "rollback"})
		waitStatus(tid, third, "success")
		if st := status(tid, second); st != "deleted" {
			t.Fatalf("the rolled back run is %s, want deleted", st)
		}
		var th map[string]any
		p.call(t, "GET", "/threads/"+tid+"/state", nil, &th)
		md, _ := th["metadata"].(map[string]any)
		cairn, _ := md["cairn"].(map[string]any)
		// The third run ran from the first run's end: its steps' parent
		// chain reaches a rollback fork of the first run's last checkpoint.
		parents, _ := queueHistory(t, p, tid)
		seq := int64(cairn["seq"].(float64))
		for seq > 0 && parents[seq] >= int64(len(before)) {
			seq = parents[seq]
		}
		if parents[seq] != int64(len(before)-1) {
			t.Fatalf("the third run does not continue from the first run's end (%d checkpoints before): chain ends at %d ← %d; %v", len(before), seq, parents[seq], parents)
		}
	})

	t.Run("cancel rollback", func(t *testing.T) {
		tid, rid := startSlowRun(t, p)
		if code := p.call(t, "POST", "/threads/"+tid+"/runs/"+rid+"/cancel?action=rollback&wait=1", nil, nil); code != 204 {
			t.Fatalf("cancel with rollback: %d", code)
		}
		if st := status(tid, rid); st != "deleted" {
			t.Fatalf("the rolled back run is %s", st)
		}
		// The worker deletes the run's record, then empties its thread: the
		// wait ends with the record, the thread follows within moments.
		var st map[string]any
		crashtest.WaitFor(t, 5*time.Second, "the rolled back thread empty", func() bool {
			p.call(t, "GET", "/threads/"+tid+"/state", nil, &st)
			v, _ := st["values"].(map[string]any)
			return len(v) == 0
		})
	})
}
