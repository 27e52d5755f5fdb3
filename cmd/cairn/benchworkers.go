package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/store"
)

// workersBench configures cairn bench workers.
type workersBench struct {
	levels      []int
	perWorker   int
	concurrency int
	delay       time.Duration
}

// ioBoundAgent is the benchmark's agent: five steps, each a scripted model
// call that takes the delay (an I/O-bound run).
func ioBoundAgent(dir string, delay time.Duration) error {
	if err := os.MkdirAll(filepath.Join(dir, "replies"), 0o755); err != nil {
		return err
	}
	var agent, replies strings.Builder
	agent.WriteString("---\nname: io-bound\nmodel: {provider: scripted, script: replies/io-bound.yaml}\nchain:\n")
	replies.WriteString("replies:\n")
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&agent, "  - {id: s%d, kind: text}\n", i)
		fmt.Fprintf(&replies, "  - {step: s%d, text: \"done %d\", delay_ms: %d}\n", i, i, delay.Milliseconds())
	}
	agent.WriteString("---\n")
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&agent, "\n## step:s%d\n\nStep %d.\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "io-bound.md"), []byte(agent.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "replies", "io-bound.yaml"), []byte(replies.String()), 0o644)
}

// benchWorkers measures runs/s of I/O-bound runs with 1, 2, 4, … worker
// processes against linear scaling from one.
func (a *app) benchWorkers(ctx context.Context, wb workersBench) error {
	dir, err := os.MkdirTemp("", "cairn-bench-workers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := ioBoundAgent(dir, wb.delay); err != nil {
		return err
	}
	list, err := a.loadAssistants(dir, "")
	if err != nil {
		return err
	}
	s, _, queue, err := a.queueBackend(ctx, "cairn bench workers")
	if err != nil {
		return err
	}
	defer s.Close()
	srv, err := server.New(server.Config{Store: s, Assistants: list, Queue: queue})
	if err != nil {
		return err
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	rl, err := store.RunLogOf(s)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "workers\truns\truns/s\tlinear from one\tratio\t(5 steps × %s model calls, %d runs at once per worker)\n", wb.delay, wb.concurrency)
	var one float64
	for _, n := range wb.levels {
		rate, err := a.workersLevel(ctx, hs.URL, dir, rl, n, wb)
		if err != nil {
			return err
		}
		if one == 0 {
			one = rate / float64(n)
		}
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.1f\t%.2f\t\n", n, n*wb.perWorker, rate, one*float64(n), rate/(one*float64(n)))
	}
	return tw.Flush()
}

// workersLevel starts n worker processes, queues n×perWorker runs and
// returns runs/s from the first queued to the last finished.
func (a *app) workersLevel(ctx context.Context, url, dir string, rl store.RunLog, n int, wb workersBench) (float64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
			_ = p.Wait()
		}
	}()
	for i := range n {
		cmd := exec.CommandContext(ctx, exe, "worker", "--assistants", dir, "--store", a.storeURL, "--concurrency", strconv.Itoa(wb.concurrency), "--id", fmt.Sprintf("bench-%d-%d", n, i))
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		procs = append(procs, cmd)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() && !strings.Contains(sc.Text(), "taking runs of") {
		}
		go func() {
			for sc.Scan() {
			}
		}()
	}
	start := time.Now()
	for range n * wb.perWorker {
		if err := queueRun(url); err != nil {
			return 0, err
		}
	}
	for {
		left, err := rl.Runs(ctx, store.RunQuery{Status: []string{"pending", "running"}, Limit: 1})
		if err != nil {
			return 0, err
		}
		if len(left) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return float64(n*wb.perWorker) / time.Since(start).Seconds(), nil
}

// queueRun creates a thread and queues a run of the benchmark's agent.
func queueRun(url string) error {
	res, err := http.Post(url+"/threads", "application/json", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	var th struct {
		ThreadID string `json:"thread_id"`
	}
	err = json.NewDecoder(res.Body).Decode(&th)
	res.Body.Close()
	if err != nil || th.ThreadID == "" {
		return fmt.Errorf("creating a thread: HTTP %d: %v", res.StatusCode, err)
	}
	res, err = http.Post(url+"/threads/"+th.ThreadID+"/runs", "application/json", strings.NewReader(`{"assistant_id": "io-bound", "input": "go"}`))
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		return fmt.Errorf("queueing a run: HTTP %d", res.StatusCode)
	}
	return nil
}

// parse reads --workers and checks the other flags.
func (wb *workersBench) parse(levels string) error {
	for _, f := range strings.Split(levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 64 {
			return usagef("--workers %q: comma-separated numbers from 1 to 64", levels)
		}
		wb.levels = append(wb.levels, n)
	}
	if wb.perWorker < 1 || wb.concurrency < 1 || wb.delay < 0 {
		return usagef("--runs-per-worker, --concurrency and --delay must be positive")
	}
	return nil
}
