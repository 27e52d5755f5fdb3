package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// TestServeRetention: a thread created through the API with a time to
// live is deleted by cairn serve's retention sweep once idle for longer;
// a thread without one, and one paused for an answer, stay; bad ttls are
// 422s that create nothing; the sweeps' keep-last leaves the newest 2 checkpoints of a thread, their
// states as they were;
// the event log of a run that ended goes after --retention-run-logs, its
// record stays.
func TestServeRetention(t *testing.T) {
	dir := t.TempDir()
	p := startServe(t, "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", "sqlite://"+filepath.Join(dir, "r.db"),
		"--retention-every", "200ms", "--retention-keep-last", "2", "--retention-run-logs", "1s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(p.logText())
		}
	})
	for _, tc := range []struct {
		name string
		body map[string]any
		code int
	}{
		{"minutes", map[string]any{"thread_id": "short", "ttl": 0.005}, 200},
		{"object", map[string]any{"thread_id": "short2", "ttl": map[string]any{"ttl": 0.005, "strategy": "delete"}}, 200},
		{"none", map[string]any{"thread_id": "kept"}, 200},
		{"paused", map[string]any{"thread_id": "paused", "ttl": 0.005}, 200},
		{"keep_latest", map[string]any{"thread_id": "bad1", "ttl": map[string]any{"ttl": 5, "strategy": "keep_latest"}}, 422},
		{"zero", map[string]any{"thread_id": "bad2", "ttl": 0}, 422},
		{"text", map[string]any{"thread_id": "bad3", "ttl": "soon"}, 422},
		{"unknown field", map[string]any{"thread_id": "bad4", "ttl": map[string]any{"ttl": 5, "when": 1}}, 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code := p.call(t, "POST", "/threads", tc.body, nil); code != tc.code {
				t.Fatalf("create: %d, want %d", code, tc.code)
			}
			if tc.code != 200 {
				if code := p.call(t, "GET", "/threads/"+tc.body["thread_id"].(string), nil, nil); code != 404 {
					t.Fatalf("a refused thread exists: %d", code)
				}
			}
		})
	}
	// Five steps on "kept", streamed: the sweeps may prune the thread as
	// soon as the run ends, so its states are read from the stream.
	code, text := p.post(t, "/threads/kept/runs/stream", map[string]any{"assistant_id": "five-steps", "input": "x", "stream_mode": "values"})
	var orig []any // newest first, as the history lists
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "data: "); ok && strings.HasPrefix(v, "{") {
			var m map[string]any
			if err := json.Unmarshal([]byte(v), &m); err == nil {
				orig = append([]any{map[string]any{"values": m}}, orig...)
			}
		}
	}
	if code != 200 || len(orig) < 5 {
		t.Fatalf("run: %d, %d states: %.300s", code, len(orig), text)
	}
	if code := p.call(t, "POST", "/threads/paused/runs/wait", map[string]any{"assistant_id": "approval", "input": "Where is my order?"}, nil); code != 200 {
		t.Fatalf("run: %d", code)
	}
	crashtest.WaitFor(t, 10*time.Second, "the sweep to delete the expired threads", func() bool {
		return p.call(t, "GET", "/threads/short", nil, nil) == 404 && p.call(t, "GET", "/threads/short2", nil, nil) == 404
	})
	for _, id := range []string{"kept", "paused"} {
		if code := p.call(t, "GET", "/threads/"+id, nil, nil); code != 200 {
			t.Errorf("thread %s: %d after the sweep", id, code)
		}
	}
	var st map[string]any
	time.Sleep(500 * time.Millisecond) // a few more sweeps
	var h []any
	if p.call(t, "POST", "/threads/kept/history", map[string]any{"limit": 100}, &h); len(h) != 2 {
		t.Fatalf("%d checkpoints after the sweeps, %d before; keep-last 2 keeps 2", len(h), len(orig))
	}
	for i := range h {
		if got, want := h[i].(map[string]any)["values"], orig[i].(map[string]any)["values"]; !reflect.DeepEqual(got, want) {
			t.Fatalf("checkpoint %d from the head after the sweeps: %v, was %v", i, got, want)
		}
	}
	if code := p.call(t, "GET", "/threads/kept/state", nil, &st); code != 200 || st["values"] == nil {
		t.Fatalf("state after the sweep: %d %v", code, st)
	}
	var runs []map[string]any
	if p.call(t, "GET", "/threads/kept/runs", nil, &runs); len(runs) != 1 {
		t.Fatalf("runs of kept: %v", runs)
	}
	stream := p.url + "/threads/kept/runs/" + runs[0]["run_id"].(string) + "/stream"
	crashtest.WaitFor(t, 10*time.Second, "the sweep to delete the ended run's event log", func() bool {
		return len(readSSE(t, streamFrom(t, context.Background(), stream, ""), nil)) == 0
	})
	if p.call(t, "GET", "/threads/kept/runs/"+runs[0]["run_id"].(string), nil, nil) != 200 {
		t.Fatal("the run's record went with its log")
	}
}

// historyStates returns the state of every checkpoint of a thread, by
// seq, and the history's JSON entries, through cairn history --states
// --json.
func historyStates(t *testing.T, env map[string]string, thread string) (map[int64]string, []map[string]any) {
	t.Helper()
	code, out, errOut := cli(t, env, "history", thread, "--states", "--json")
	if code != 0 {
		t.Fatalf("history %s: %d %s", thread, code, errOut)
	}
	var cps []map[string]any
	if err := json.Unmarshal([]byte(out), &cps); err != nil {
		t.Fatal(err)
	}
	states := map[int64]string{}
	for _, cp := range cps {
		b, err := json.Marshal(cp["state"])
		if err != nil {
			t.Fatal(err)
		}
		states[int64(cp["seq"].(float64))] = string(b)
	}
	return states, cps
}

// storedPieces returns pieces of the blobs of a thread's checkpoint 1 as
// the store at url holds them (sealed, in an encrypted store).
func storedPieces(t *testing.T, url, thread string) [][]byte {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, url, store.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.Backend().Rows(ctx, driver.RowQuery{Thread: thread, From: 1, To: 1, Snapshots: true})
	if err != nil || len(rows) != 1 {
		t.Fatalf("checkpoint 1 of %s as stored: %v %d", thread, err, len(rows))
	}
	var pieces [][]byte
	for _, blob := range [][]byte{rows[0].Patch, rows[0].Snapshot} {
		mid := len(blob) / 2
		pieces = append(pieces, bytes.Clone(blob[mid-12:mid+12]))
	}
	return pieces
}

// storeBackends are the stores the CLI's retention tests run on: each
// gives a store URL and a function returning every byte the store holds
// (a SQLite file and its journals; every row of a PostgreSQL schema,
// when CAIRN_TEST_POSTGRES names a server).
var storeBackends = []struct {
	name string
	open func(t *testing.T) (url string, stored func() []byte)
}{
	{"sqlite", func(t *testing.T) (string, func() []byte) {
		db := filepath.Join(t.TempDir(), "state.db")
		return "sqlite:" + db, func() []byte { return storeBytes(t, db) }
	}},
	{"postgres", func(t *testing.T) (string, func() []byte) {
		dsn, _ := pgtest.Schema(t, "cairn_prune")
		return dsn, func() []byte { return pgtest.Bytes(t, dsn) }
	}},
}

// TestPruneDeletesOldData, through the CLI on SQLite and PostgreSQL,
// plaintext and encrypted: a run's input holds a secret in checkpoints
// 1..6 of thread t, two forks replace it (7, 8); thread p waits for an
// approval. cairn prune --keep-last 2 --vacuum leaves 7 and 8 of t, and 2
// and 3 of p (3 is the pause, 2 the state its step resumes from): no byte
// the store holds (the SQLite file and its journals; every row of the
// PostgreSQL schema) has the secret or checkpoint 1's stored blobs, and an
// encrypted store holds no kept state in the clear (the snapshot the prune
// gave 7 is sealed); cairn history lists what is left, each with its state
// as before, and marks 7 as where the pruned history ended; p resumes with
// the answer and finishes.
func TestPruneDeletesOldData(t *testing.T) {
	for _, be := range storeBackends {
		for _, tc := range []struct{ name, keys string }{{"plaintext", ""}, {"encrypted", testKey(3)}} {
			t.Run(be.name+"/"+tc.name, func(t *testing.T) {
				url, stored := be.open(t)
				env := map[string]string{"CAIRN_STORE": url, "CAIRN_ENCRYPTION_KEYS": tc.keys}
				pruneOldData(t, env, stored)
			})
		}
	}
}

// pruneOldData is TestPruneDeletesOldData on one store: stored returns
// every byte it holds.
func pruneOldData(t *testing.T, env map[string]string, stored func() []byte) {
	const secret = "CUSTOMER-CARD-4929-0071-5538-1162"
	const kept = "resumes from the last one" // in the state of 7 (a step's reply)
	examples := filepath.Join("..", "..", "examples", "serve")
	mustCLI := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := cli(t, env, args...)
		if code != want {
			t.Fatalf("cairn %v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
		return out
	}
	mustCLI(0, "run", filepath.Join(examples, "five-steps.md"), "--thread", "t", "--input-text", "refund to card "+secret)
	mustCLI(0, "fork", "t", "--at", "6", "--set", `input={"source":"inline","kind":"text","content":"refund to the card on file"}`)
	mustCLI(0, "fork", "t", "--at", "7", "--set", `note="card number removed"`)
	mustCLI(3, "run", filepath.Join(examples, "approval.md"), "--thread", "p", "--input-text", "Where is my order?")
	beforeT, _ := historyStates(t, env, "t")
	beforeP, _ := historyStates(t, env, "p")
	pieces := storedPieces(t, env["CAIRN_STORE"], "t")
	plain := env["CAIRN_ENCRYPTION_KEYS"] == ""
	if raw := stored(); bytes.Contains(raw, []byte(secret)) != plain || bytes.Contains(raw, []byte(kept)) != plain || !bytes.Contains(raw, pieces[0]) || !bytes.Contains(raw, pieces[1]) {
		t.Fatal("before the prune, the store does not hold what the check looks for")
	}
	out := mustCLI(0, "prune", "--keep-last", "2", "--vacuum")
	if !strings.Contains(out, "pruned 6 checkpoints") || !strings.Contains(out, "vacuumed") {
		t.Fatalf("prune: %s", out)
	}
	raw := stored()
	if bytes.Contains(raw, []byte(secret)) {
		t.Fatal("the pruned secret is still stored")
	}
	// Sealed, checkpoint 1's blobs are ciphertext no kept blob
	// holds; in the clear, parts of them are in kept states too.
	if !plain && (bytes.Contains(raw, pieces[0]) || bytes.Contains(raw, pieces[1])) {
		t.Fatal("checkpoint 1's sealed blobs are still stored")
	}
	if !plain && bytes.Contains(raw, []byte(kept)) {
		t.Fatal("a kept state is in the clear in an encrypted store: the snapshot the prune wrote is not sealed")
	}
	// p, paused before its second step, is its input and the step that
	// paused: two checkpoints, which the prune keeps whole.
	for thread, want := range map[string]string{"t": "[7 8]", "p": "[1 2]"} {
		before := map[string]map[int64]string{"t": beforeT, "p": beforeP}[thread]
		after, cps := historyStates(t, env, thread)
		var seqs []int64
		for seq, st := range after {
			if st != before[seq] {
				t.Fatalf("%s checkpoint %d after the prune: %s, was %s", thread, seq, st, before[seq])
			}
			seqs = append(seqs, seq)
		}
		if slices.Sort(seqs); fmt.Sprint(seqs) != want {
			t.Fatalf("%s after the prune: %v, want %s", thread, seqs, want)
		}
		if oldest := cps[len(cps)-1]; (oldest["pruned_before"] == true) != (thread == "t") {
			t.Fatalf("%s: the oldest checkpoint left is not marked as where the pruned history ended: %v", thread, oldest)
		}
	}
	if out := mustCLI(0, "history", "t"); !strings.Contains(out, "parent 6 pruned") || strings.Count(out, "\n") != 3 {
		t.Fatalf("history of t after the prune:\n%s", out)
	}
	if out := mustCLI(0, "resume", "p", "--answer", `"approved"`); !strings.Contains(out, "Sent:") {
		t.Fatalf("resume of the paused thread after the prune: %s", out)
	}
}

// raceWriter appends checkpoints to thread "race" of s in bursts of 20
// until stop is closed (or a minute and a half went by), and returns the
// state of each by seq; the first error ends it. After a burst it waits
// (up to five seconds) for a prune that started after the burst to end
// (pruned: the start of each prune that ended), so that some prunes run
// between bursts and rebase the head the next burst builds on, while the
// next prune is already racing that burst.
func raceWriter(ctx context.Context, s store.Store, stop <-chan struct{}, pruned <-chan time.Time) (map[int64]string, error) {
	schema := state.MustSchema()
	doc, head := state.EmptyDoc(), int64(0)
	want := map[int64]string{}
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		for range 20 {
			// A few hundred bytes a step: a (late) snapshot every dozen.
			nd, patch, err := schema.Apply(doc, state.Update{"n": head + 1, "text": fmt.Sprintf("step %d %0300d", head+1, head+1)})
			if err != nil {
				return want, err
			}
			cp, err := s.Append(ctx, store.Checkpoint{Thread: "race", Parent: head, Patch: patch, State: nd})
			if err != nil {
				return want, fmt.Errorf("append on %d: %w", head, err)
			}
			want[cp.Seq], doc, head = nd.String(), nd, cp.Seq
		}
		for burst, quiet := time.Now(), false; !quiet; {
			select {
			case <-stop:
				return want, nil
			case started := <-pruned:
				quiet = started.After(burst)
			case <-time.After(5 * time.Second):
				quiet = true
			}
		}
	}
	return want, nil
}

// TestPruneRacesWriter: cairn prune --keep-last 2 in processes of its
// own, one after another, while this process appends to the same thread
// in bursts (SQLite, and PostgreSQL when CAIRN_TEST_POSTGRES names a
// server). A prune between two bursts rebases the row the writer's next
// append builds on, which the writer holds as it committed it; one during
// a burst races it. Every append commits, every checkpoint left rebuilds
// to its state, and a last prune leaves 2.
func TestPruneRacesWriter(t *testing.T) {
	for _, be := range storeBackends {
		t.Run(be.name, func(t *testing.T) {
			url, _ := be.open(t)
			ctx := context.Background()
			s, err := store.Open(ctx, url, store.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			want := raceCLIPrunes(t, s, url)
			checkLeft := func(n int) {
				t.Helper()
				left := 0
				for cp, err := range s.History(ctx, store.HistoryRequest{Thread: "race", WithState: true}) {
					if err != nil {
						t.Fatalf("history after the race: %v", err)
					}
					if cp.State.String() != want[cp.Seq] {
						t.Fatalf("checkpoint %d after the race: %.80s, want %.80s", cp.Seq, cp.State.String(), want[cp.Seq])
					}
					left++
				}
				if n > 0 && left != n {
					t.Fatalf("%d checkpoints left, want %d", left, n)
				}
			}
			checkLeft(0)
			if code, out, errOut := cli(t, map[string]string{"CAIRN_STORE": url}, "prune", "--keep-last", "2", "--thread", "race"); code != 0 {
				t.Fatalf("last prune: %d %s %s", code, out, errOut)
			}
			checkLeft(2)
		})
	}
}

// raceCLIPrunes runs cairn prune processes while raceWriter writes on s,
// until five of them deleted checkpoints; it returns what the writer
// wrote.
func raceCLIPrunes(t *testing.T, s store.Store, url string) map[int64]string {
	t.Helper()
	type result struct {
		want map[int64]string
		err  error
	}
	stop, done, pruned := make(chan struct{}), make(chan result, 1), make(chan time.Time, 10000)
	halt := sync.OnceFunc(func() { close(stop) })
	defer halt()
	go func() {
		want, err := raceWriter(context.Background(), s, stop, pruned)
		done <- result{want, err}
	}()
	prunes, deleting := 0, 0
	for {
		started := time.Now()
		cmd := cairnProcess(t, []string{"CAIRN_STORE=" + url}, "prune", "--keep-last", "2", "--thread", "race", "--json")
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		out, err := cmd.Output()
		var pr struct{ Checkpoints int64 }
		if err != nil || json.Unmarshal(out, &pr) != nil {
			t.Fatalf("prune while writing: %v\n%s%s", err, out, errOut.String())
		}
		if prunes++; pr.Checkpoints > 0 {
			deleting++
		}
		pruned <- started
		if deleting >= 5 {
			halt()
		}
		select {
		case res := <-done:
			if res.err != nil || deleting < 5 {
				t.Fatalf("the writer, racing %d prunes (%d deleted checkpoints): %v", prunes, deleting, res.err)
			}
			t.Logf("%d prunes, %d of them deleted checkpoints, while the writer wrote %d", prunes, deleting, len(res.want))
			return res.want
		default:
		}
	}
}
