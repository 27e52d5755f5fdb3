package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/pgtest"
)

// TestCronTwoServersKilled: two cairn serve processes on one PostgreSQL
// database schedule a cron of every minute on a thread, on a crons' clock
// sixty times fast (CAIRN_TEST_CRON_CLOCK: a minute a second). Each is
// killed (SIGKILL) in turn and started again while the other goes on.
// Every minute from the cron's making to its disabling has made exactly
// one run: none twice, none lost. A tick whose run the service refused
// (the other server's run of the agent file's chain still unfinished on
// the thread: its rule for new input) counts as made once if a server
// logged the refusal, and twice if the tick has a run too.
func TestCronTwoServersKilled(t *testing.T) {
	dsn, _ := pgtest.Schema(t, "cairn_cron")
	env := []string{fmt.Sprintf("%s=%dx60", cronClockEnv, time.Now().Unix())}
	start := func() *serveProcess {
		return startServeCmd(t, cairnProcess(t, env, "serve", "--addr", "127.0.0.1:0", "--assistants", filepath.Join("..", "..", "examples", "serve"),
			"--store", dsn, "--cron-tick", "100ms"))
	}
	servers := []*serveProcess{start(), start()}
	all := append([]*serveProcess{}, servers...) // every process, killed ones too, for their logs
	var th, cron map[string]any
	servers[0].call(t, "POST", "/threads", map[string]any{}, &th)
	tid := th["thread_id"].(string)
	if code := servers[0].call(t, "POST", "/threads/"+tid+"/runs/crons", map[string]any{"assistant_id": "five-steps", "schedule": "* * * * *", "input": "x"}, &cron); code != 200 {
		t.Fatalf("cron: %d %v", code, cron)
	}
	for i := range servers {
		time.Sleep(2500 * time.Millisecond)
		servers[i].stop(syscall.SIGKILL)
		time.Sleep(1500 * time.Millisecond)
		servers[i] = start()
		all = append(all, servers[i])
	}
	time.Sleep(2 * time.Second)
	var off map[string]any
	if code := servers[1].call(t, "PATCH", "/runs/crons/"+cron["cron_id"].(string), map[string]any{"enabled": false}, &off); code != 200 {
		t.Fatalf("disable: %d %v", code, off)
	}
	time.Sleep(500 * time.Millisecond) // a tick claimed before the change makes its run
	var list []map[string]any
	servers[0].call(t, "GET", "/threads/"+tid+"/runs?limit=1000", nil, &list)
	var ticks []time.Time
	for _, r := range list {
		md, _ := r["metadata"].(map[string]any)
		tick, err := time.Parse(time.RFC3339Nano, fmt.Sprint(md["cron_tick"]))
		if err != nil {
			t.Fatalf("a run without its cron tick: %v", r)
		}
		ticks = append(ticks, tick)
	}
	ticks = append(ticks, refusedTicks(t, all, cron["cron_id"].(string))...)
	slices.SortFunc(ticks, func(a, b time.Time) int { return a.Compare(b) })
	made, _ := time.Parse(time.RFC3339Nano, cron["created_at"].(string))
	stopped, _ := time.Parse(time.RFC3339Nano, off["updated_at"].(string))
	want := made.Truncate(time.Minute).Add(time.Minute)
	if len(ticks) == 0 || !ticks[0].Equal(want) {
		t.Fatalf("ticks %v: want the first at %s", ticks, want)
	}
	for i, tick := range ticks {
		if exp := want.Add(time.Duration(i) * time.Minute); !tick.Equal(exp) {
			t.Fatalf("tick %d is %s, want %s (a tick ran twice or was lost): %v\nlogs:\n%s\n%s", i, tick, exp, ticks, servers[0].logText(), servers[1].logText())
		}
	}
	t.Logf("%d ticks, each once", len(ticks))
	if last := ticks[len(ticks)-1]; last.Before(stopped.Add(-2 * time.Minute)) {
		t.Fatalf("the last tick is %s; the cron was disabled at %s: %s", last, stopped, strconv.Itoa(len(ticks)))
	}
}

// refusedTicks are the ticks of a cron whose run a server logged it was
// refused.
func refusedTicks(t *testing.T, ps []*serveProcess, cron string) []time.Time {
	t.Helper()
	re := regexp.MustCompile(`msg="cron tick made no run" cron=` + regexp.QuoteMeta(cron) + ` tick=(\S+)`)
	var out []time.Time
	for _, p := range ps {
		for _, m := range re.FindAllStringSubmatch(p.logText(), -1) {
			tick, err := time.Parse(time.RFC3339Nano, m[1])
			if err != nil {
				t.Fatalf("a refused tick's time %q: %v", m[1], err)
			}
			out = append(out, tick)
		}
	}
	return out
}

// TestLangGraphSDKCrons runs server/sdktest/crons.test.mjs, written with
// the official LangGraph JS SDK's client.crons, against a real cairn
// serve whose crons' clock runs a minute a second.
func TestLangGraphSDKCrons(t *testing.T) {
	node, dir := sdkSuite(t)
	db := "sqlite://" + filepath.Join(t.TempDir(), "serve.db")
	env := []string{fmt.Sprintf("%s=%dx60", cronClockEnv, time.Now().Unix())}
	p := startServeCmd(t, cairnProcess(t, env, "serve", "--addr", "127.0.0.1:0", "--assistants", filepath.Join("..", "..", "examples", "serve"),
		"--store", db, "--cron-tick", "100ms"))
	runNode(t, node, dir, []string{"CAIRN_URL=" + p.url}, "--test", "crons.test.mjs")
}

// TestCronThroughQueue: cron ticks through cairn serve --queue on
// PostgreSQL — two servers schedule, a cairn worker runs what they queue
// — each minute on the crons' fast clock makes one run, and the worker
// runs it to success.
func TestCronThroughQueue(t *testing.T) {
	dsn, _ := pgtest.Schema(t, "cairn_cronq")
	env := []string{fmt.Sprintf("%s=%dx60", cronClockEnv, time.Now().Unix())}
	assistants := filepath.Join("..", "..", "examples", "serve")
	var servers []*serveProcess
	for range 2 {
		servers = append(servers, startServeCmd(t, cairnProcess(t, env, "serve", "--queue", "--addr", "127.0.0.1:0", "--assistants", assistants, "--store", dsn, "--cron-tick", "100ms")))
	}
	startWorker(t, "--id", "w1", "--assistants", assistants, "--store", dsn)
	var th, cron map[string]any
	servers[0].call(t, "POST", "/threads", map[string]any{}, &th)
	tid := th["thread_id"].(string)
	if code := servers[1].call(t, "POST", "/threads/"+tid+"/runs/crons", map[string]any{"assistant_id": "five-steps", "schedule": "* * * * *", "input": "x"}, &cron); code != 200 {
		t.Fatalf("cron: %d %v", code, cron)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var list []map[string]any
		servers[0].call(t, "GET", "/threads/"+tid+"/runs?limit=1000", nil, &list)
		ticks, done := map[string]int{}, 0
		for _, r := range list {
			md, _ := r["metadata"].(map[string]any)
			ticks[fmt.Sprint(md["cron_tick"])]++
			if r["status"] == "success" {
				done++
			}
		}
		for tick, n := range ticks {
			if n != 1 {
				t.Fatalf("tick %s made %d runs", tick, n)
			}
		}
		if done >= 3 {
			t.Logf("%d ticks, %d run by the worker", len(ticks), done)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s (30 minutes of cron time): %d ticks, %d runs done\n%s", len(ticks), done, servers[0].logText())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
