package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cli runs the command line in-process.
func cli(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

// seeded returns a store URL holding W1 thread "0" with 30 steps.
func seeded(t *testing.T) string {
	t.Helper()
	url := "sqlite:" + filepath.Join(t.TempDir(), "cli.db")
	code, out, errOut := cli(t, nil, "bench", "w1", "--steps", "30", "--store", url, "--json")
	if code != 0 {
		t.Fatalf("bench: %d %s", code, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench output %q: %v", out, err)
	}
	for _, k := range []string{"workload", "store", "durability", "steps_per_thread", "threads", "total_ms", "us_per_step",
		"us_per_step_first10pct", "us_per_step_last10pct", "db_plus_wal_bytes", "checkpoint_rows", "get_state_ms",
		"history_ms", "history_items", "peak_rss_bytes"} {
		if _, ok := res[k]; !ok {
			t.Errorf("bench JSON lacks %q", k)
		}
	}
	if res["checkpoint_rows"].(float64) != 31 || res["history_items"].(float64) != 31 {
		t.Fatalf("bench rows: %v", res)
	}
	return url
}

func TestCommands(t *testing.T) {
	url := seeded(t)
	env := map[string]string{"CAIRN_STORE": url}
	tests := []struct {
		name string
		args []string
		want []string // substrings of stdout
	}{
		{"threads", []string{"threads"}, []string{"THREAD", "0 ", "31"}},
		{"threads json", []string{"threads", "--json"}, []string{`"id": "0"`, `"head": 31`}},
		{"state head", []string{"state", "0"}, []string{`"count": 30`, `"id": "0-m30"`}},
		{"state at", []string{"state", "0", "--at", "4"}, []string{`"count": 3`}},
		{"state json", []string{"state", "0", "--at", "2", "--json"}, []string{`"seq": 2`, `"parent": 1`, `"nodes": [`, `"state": {`}},
		{"history", []string{"history", "0", "--limit", "3"}, []string{"SEQ", "31", "step", "add /messages/-"}},
		{"history states table", []string{"history", "0", "--limit", "2", "--states"}, []string{"STATE", `"count":30`, `"count":29`}},
		{"namespaces", []string{"namespaces", "0"}, []string{"NAMESPACE", "-  ", "31"}},
		{"history json", []string{"history", "0", "--limit", "2", "--json", "--states"}, []string{`"seq": 31`, `"seq": 30`, `"state": {`}},
		{"export", []string{"export", "0", "--format", "trace", "--dir", filepath.Join(t.TempDir(), "tr")}, []string{"manifest.json", "status completed", "stop reason success"}},
		{"fork branch", []string{"fork", "0", "--at", "10", "--set", `last="edited"`}, []string{"forked 0@10 into 0@32"}},
		{"fork into", []string{"fork", "0", "--at", "5", "--into", "alt"}, []string{"forked 0@5 into alt@1"}},
		{"history shows fork", []string{"history", "0", "--limit", "1"}, []string{"fork of 10", "add /last"}},
		{"forked state", []string{"state", "0"}, []string{`"last": "edited"`, `"count": 9`}},
		{"tree", []string{"history", "0", "--tree"}, []string{"10 SUCCESS step", "├─ 11 SUCCESS step", "└─ 32 SUCCESS -  fork of 10", "│  31 SUCCESS step"}},
		{"new thread state", []string{"state", "alt"}, []string{`"count": 4`}},
		{"copy", []string{"copy", "0", "0-copy"}, []string{"copied 0 to 0-copy (head 32)"}},
		{"copy keeps the branches", []string{"history", "0-copy", "--tree"}, []string{"└─ 32 SUCCESS -  fork of 0@10", "│  31 SUCCESS step"}},
		{"prune", []string{"prune", "--keep", "5", "--thread", "0"}, []string{"pruned"}},
		{"state after prune", []string{"state", "0"}, []string{`"last": "edited"`}},
		{"prune keeps each branch's newest", []string{"history", "0", "--tree"}, []string{"32 SUCCESS", "31 SUCCESS", "27 SUCCESS step  parent 26 pruned", "7 SUCCESS step  parent 6 pruned"}},
		{"prune every thread", []string{"prune", "--keep-last", "2", "--json"}, []string{`"checkpoints": `, `"deleted_threads": []`}},
		{"the copy's old branch after prune", []string{"state", "0-copy", "--at", "30"}, []string{`"count": 29`}},
		{"prune run logs", []string{"prune", "--run-logs-older-than", "1ns", "--json"}, []string{`"run_logs": 0`, `"checkpoints": 0`}},
		{"prune idle threads", []string{"prune", "--older-than", "1ns"}, []string{"deleted 3 threads", "0 0-copy alt"}},
		{"nothing left", []string{"threads"}, []string{"THREAD"}},
	}
	for _, tc := range tests {
		code, out, errOut := cli(t, env, tc.args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.name, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Fatalf("%s: output lacks %q:\n%s", tc.name, w, out)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	url := seeded(t)
	env := map[string]string{"CAIRN_STORE": url}
	tests := []struct {
		name string
		args []string
		code int
		want string // substring of stderr
	}{
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"near a command", []string{"histry"}, 2, "did you mean history?"},
		{"unknown flag", []string{"threads", "--nope"}, 2, "unknown flag"},
		{"missing arg", []string{"state"}, 2, "accepts 1 arg"},
		{"bad thread id", []string{"state", "no spaces"}, 2, `thread id "no spaces"`},
		{"missing thread", []string{"state", "ghost"}, 1, `"ghost"`},
		{"missing seq", []string{"state", "0", "--at", "999"}, 1, "no checkpoint 999"},
		{"negative seq", []string{"state", "0", "--at", "-1"}, 2, "--at -1"},
		{"bad store", []string{"threads", "--store", "mysql://x"}, 2, "unknown scheme"},
		{"fork without at", []string{"fork", "0"}, 2, "--at is required"},
		{"fork at a negative seq", []string{"fork", "0", "--at", "-1"}, 2, "--at -1: a checkpoint seq is 1 or more"},
		{"fork bad set", []string{"fork", "0", "--at", "2", "--set", "last=not json"}, 2, "is not JSON"},
		{"fork into existing", []string{"fork", "0", "--at", "2", "--into", "0"}, 1, "exists"},
		{"states with tree", []string{"history", "0", "--tree", "--states"}, 2, "--states does not combine with --tree"},
		{"history of a missing namespace", []string{"history", "0", "--ns", "gate9"}, 1, `thread "0" has no namespace "gate9"; its namespaces: "" (root)`},
		{"state of a missing namespace", []string{"state", "0", "--ns", "gate9"}, 1, `no namespace "gate9"`},
		{"namespaces of a missing thread", []string{"namespaces", "ghost"}, 1, `"ghost"`},
		{"prune without keep", []string{"prune"}, 2, "--keep-last"},
		{"prune negative keep", []string{"prune", "--keep-last", "-2"}, 2, "--keep-last -2"},
		{"prune keeps disagree", []string{"prune", "--keep", "2", "--keep-last", "3"}, 2, "disagree"},
		{"prune one thread by age", []string{"prune", "--thread", "0", "--older-than", "1h"}, 2, "cairn delete THREAD"},
		{"prune bad duration", []string{"prune", "--older-than", "soon"}, 2, "older-than"},
		{"prune one thread's run logs", []string{"prune", "--thread", "0", "--run-logs-older-than", "1h"}, 2, "--thread goes with --keep-last only"},
		{"prune negative run logs", []string{"prune", "--run-logs-older-than", "-1h"}, 2, "--run-logs-older-than -1h0m0s"},
		{"copy onto a thread", []string{"copy", "0", "0"}, 1, "exists"},
		{"copy to a bad id", []string{"copy", "0", "no spaces"}, 2, `NEW "no spaces"`},
		{"copy of a missing thread", []string{"copy", "ghost", "ghost2"}, 1, `"ghost"`},
		{"delete a missing thread", []string{"delete", "ghost"}, 1, `"ghost"`},
		{"delete without a thread", []string{"delete"}, 2, "accepts 1 arg"},
		{"bench unknown", []string{"bench", "w5"}, 2, "w1, w2, w3, w4 or workers"},
		{"bench durability", []string{"bench", "w1", "--durability", "fast"}, 2, "durability"},
		{"bench into used store", []string{"bench", "w1", "--steps", "5", "--store", url}, 1, "already exists"},
		{"meta filter", []string{"threads", "--meta", "novalue"}, 2, "key=value"},
		{"export format", []string{"export", "0", "--format", "pdf", "--dir", "x"}, 2, "supported formats"},
		{"export gate files of a non-pipeline", []string{"export", "0", "--format", "gate-files", "--dir", t.TempDir()}, 1, "not a gate pipeline"},
		{"export no dir", []string{"export", "0"}, 2, "--dir is required"},
		{"export missing thread", []string{"export", "ghost", "--dir", t.TempDir()}, 1, `"ghost"`},
	}
	for _, tc := range tests {
		code, _, errOut := cli(t, env, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d with %q", tc.name, code, errOut, tc.code, tc.want)
		}
	}
	// Failed commands left the thread as it was.
	code, out, _ := cli(t, env, "threads", "--json")
	if code != 0 || !strings.Contains(out, `"head": 31`) {
		t.Fatalf("store changed by failed commands: %s", out)
	}
}

func TestBenchW2(t *testing.T) {
	code, out, errOut := cli(t, nil, "bench", "w2", "--threads", "3", "--steps", "10", "--json")
	if code != 0 {
		t.Fatalf("w2: %d %s", code, errOut)
	}
	var res struct {
		Mode           string `json:"mode"`
		CheckpointRows int    `json:"checkpoint_rows"`
		Concurrent     *struct {
			Mode           string `json:"mode"`
			CheckpointRows int    `json:"checkpoint_rows"`
		} `json:"concurrent"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Mode != "sequential" || res.CheckpointRows != 33 || res.Concurrent == nil || res.Concurrent.Mode != "concurrent" || res.Concurrent.CheckpointRows != 33 {
		t.Fatalf("w2 result %s", out)
	}
}

// TestBenchRelativeStorePath: bench w1 on a store named by a path relative
// to the working directory measures the SQLite floor beside it too.
func TestBenchRelativeStorePath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	code, out, errOut := cli(t, nil, "--store", "sqlite:b.db", "bench", "w1", "--steps", "20", "--json")
	if code != 0 {
		t.Fatalf("bench w1 on sqlite:b.db: exit %d\n%s", code, errOut)
	}
	var res struct {
		Floor float64 `json:"floor_us_per_commit"`
		Rows  int     `json:"checkpoint_rows"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Floor <= 0 || res.Rows != 21 {
		t.Fatalf("bench result %s", out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "b.db" {
		t.Fatalf("the working directory holds %v, want b.db alone", entries)
	}
}
