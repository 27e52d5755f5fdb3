package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/internal/pgtest"
)

// The marker is in the run's input and the model's reply: it is in the
// state of every checkpoint after the first step.
const (
	encMarker  = "ZEBRA-QUARTZ-PLAN-7391"
	encAgent   = "---\nname: enc\nmodel: {provider: scripted, script: replies/r.yaml}\n---\n## Instructions\nSummarise.\n"
	encReplies = "replies:\n  - text: \"the summary: " + encMarker + "\"\n"
)

func testKey(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) }

// encDir writes the agent and its replies; it returns the directory.
func encDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "replies"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"enc.md": encAgent, "replies/r.yaml": encReplies} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// storeBytes reads the database files of a SQLite store (the file, its
// WAL and shared memory).
func storeBytes(t *testing.T, db string) []byte {
	t.Helper()
	var all []byte
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(db + suffix)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// TestEncryptedRun runs an agent file on an encrypted SQLite store and on
// a plaintext one: the state's text is in the plaintext store's bytes and
// not in the encrypted one's, which reads back only with the key.
func TestEncryptedRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keys      string
		wantBytes bool
	}{{"plaintext", "", true}, {"encrypted", testKey(1), false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := encDir(t)
			db := filepath.Join(dir, "state.db")
			env := map[string]string{"CAIRN_STORE": "sqlite:" + db, "CAIRN_ENCRYPTION_KEYS": tc.keys}
			if code, _, errOut := cli(t, env, "run", filepath.Join(dir, "enc.md"), "--thread", "t", "--input-text", "input "+encMarker); code != 0 {
				t.Fatalf("run: %d %s", code, errOut)
			}
			if code, out, errOut := cli(t, env, "state", "t"); code != 0 || !strings.Contains(out, encMarker) {
				t.Fatalf("state: %d %s %s", code, out, errOut)
			}
			if got := bytes.Contains(storeBytes(t, db), []byte(encMarker)); got != tc.wantBytes {
				t.Fatalf("the state's text in the database file: %v, want %v", got, tc.wantBytes)
			}
			if tc.keys == "" {
				return
			}
			// Without the key: a clear error, never the ciphertext.
			code, out, errOut := cli(t, map[string]string{"CAIRN_STORE": "sqlite:" + db}, "state", "t")
			if code != 1 || !strings.Contains(errOut, "CAIRN_ENCRYPTION_KEYS") || strings.Contains(out+errOut, encMarker) {
				t.Fatalf("state without the key: %d %s %s", code, out, errOut)
			}
			// With another key: the blob's key is not in the ring.
			env["CAIRN_ENCRYPTION_KEYS"] = testKey(9)
			if code, _, errOut := cli(t, env, "history", "t", "--states"); code != 1 || !strings.Contains(errOut, "no key") {
				t.Fatalf("history with another key: %d %s", code, errOut)
			}
		})
	}
}

// TestEncryptionKeyErrors: malformed keys exit 2 before anything is
// created, naming the variable, never echoing the key.
func TestEncryptionKeyErrors(t *testing.T) {
	dir := encDir(t)
	keyFile := filepath.Join(dir, "keys")
	if err := os.WriteFile(keyFile, []byte(testKey(1)+"\n"+testKey(2)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
	for _, tc := range []struct {
		name, keys, file, want string
	}{
		{"not base64", "secret-not-base64!!", "", "key 1 of 1 is not base64"},
		{"short key", testKey(1) + "," + short, "", "key 2 of 2 is 16 bytes, want 32"},
		{"repeated key", testKey(1) + "," + testKey(1), "", "key 2 repeats key 1"},
		{"both variables", testKey(1), keyFile, "both CAIRN_ENCRYPTION_KEYS and CAIRN_ENCRYPTION_KEYS_FILE"},
		{"missing file", "", filepath.Join(dir, "nokeys"), "CAIRN_ENCRYPTION_KEYS_FILE: reading"},
		{"empty list", " , ", "", "holds no keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "state.db")
			env := map[string]string{"CAIRN_STORE": "sqlite:" + db, "CAIRN_ENCRYPTION_KEYS": tc.keys, "CAIRN_ENCRYPTION_KEYS_FILE": tc.file}
			code, out, errOut := cli(t, env, "run", filepath.Join(dir, "enc.md"), "--input-text", "x")
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
			if strings.Contains(out+errOut, "secret-not-base64") || strings.Contains(out+errOut, strings.TrimRight(short, "=")) {
				t.Fatalf("key material shown: %s %s", out, errOut)
			}
			if _, err := os.Stat(db); !os.IsNotExist(err) {
				t.Fatalf("a store was created: %v", err)
			}
		})
	}
	// A key file works as the variable does.
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "state.db"), "CAIRN_ENCRYPTION_KEYS_FILE": keyFile}
	if code, _, errOut := cli(t, env, "run", filepath.Join(dir, "enc.md"), "--thread", "f", "--input-text", "x"); code != 0 {
		t.Fatalf("run with a key file: %d %s", code, errOut)
	}
}

// TestRekeyCommand encrypts a plaintext store with cairn rekey, rotates
// it to a second key, and drops the first.
func TestRekeyCommand(t *testing.T) {
	dir := encDir(t)
	db := filepath.Join(dir, "state.db")
	env := func(keys string) map[string]string {
		return map[string]string{"CAIRN_STORE": "sqlite:" + db, "CAIRN_ENCRYPTION_KEYS": keys}
	}
	if code, _, errOut := cli(t, env(""), "run", filepath.Join(dir, "enc.md"), "--thread", "t", "--input-text", "x"); code != 0 {
		t.Fatalf("run: %d %s", code, errOut)
	}
	if !bytes.Contains(storeBytes(t, db), []byte(encMarker)) {
		t.Fatal("the plaintext store does not hold the state's text: the search below proves nothing")
	}
	if code, _, errOut := cli(t, env(""), "rekey"); code != 2 || !strings.Contains(errOut, "rekey needs the keys") {
		t.Fatalf("rekey without keys: %d %s", code, errOut)
	}
	// A plaintext store is refused by a process with keys until rekeyed.
	if code, _, errOut := cli(t, env(testKey(1)), "state", "t"); code != 1 || !strings.Contains(errOut, "not encrypted") {
		t.Fatalf("plaintext store read with keys: %d %s", code, errOut)
	}
	code, out, errOut := cli(t, env(testKey(1)), "rekey", "--vacuum")
	if code != 0 || !strings.Contains(out, "rekeyed") || strings.Contains(out, " 0 checkpoints") || !strings.Contains(out, "vacuumed") {
		t.Fatalf("rekey of a plaintext store: %d %s %s", code, out, errOut)
	}
	// Vacuumed: no freed page of the file or its WAL keeps the plaintext.
	if bytes.Contains(storeBytes(t, db), []byte(encMarker)) {
		t.Fatal("the database file holds the state's text after rekey --vacuum")
	}
	if code, out, _ := cli(t, env(testKey(1)), "state", "t"); code != 0 || !strings.Contains(out, encMarker) {
		t.Fatalf("state after encrypting: %d %s", code, out)
	}
	// Rotation: the new key first, the old one still listed.
	code, out, errOut = cli(t, env(testKey(2)+","+testKey(1)), "rekey", "--json")
	if code != 0 || !strings.Contains(out, `"checkpoints"`) || !strings.Contains(out, `"changed": 0`) {
		t.Fatalf("rekey to key 2: %d %s %s", code, out, errOut)
	}
	if code, out, _ := cli(t, env(testKey(2)), "state", "t"); code != 0 || !strings.Contains(out, encMarker) {
		t.Fatalf("state with key 2 alone: %d %s", code, out)
	}
	if code, _, errOut := cli(t, env(testKey(1)), "state", "t"); code != 1 || !strings.Contains(errOut, "no key") {
		t.Fatalf("state with the dropped key: %d %s", code, errOut)
	}
	// Another pass finds nothing to do.
	if code, out, _ := cli(t, env(testKey(2)), "rekey"); code != 0 || !strings.Contains(out, "0 checkpoints, 0 snapshots") {
		t.Fatalf("second rekey: %d %s", code, out)
	}
}

// TestBenchEncryption: cairn bench w1 --encryption both runs W1 without
// and with encryption and reports their ratio.
func TestBenchEncryption(t *testing.T) {
	code, out, errOut := cli(t, nil, "bench", "w1", "--steps", "20", "--encryption", "both", "--rounds", "1", "--json")
	if code != 0 {
		t.Fatalf("bench: %d %s", code, errOut)
	}
	var c struct {
		Plain, Encrypted struct {
			Encrypted      bool `json:"encrypted"`
			CheckpointRows int  `json:"checkpoint_rows"`
		}
		Ratio       float64
		MedianRatio float64 `json:"median_ratio"`
		CPURatio    float64 `json:"cpu_ratio"`
	}
	if err := json.Unmarshal([]byte(out), &c); err != nil || c.Plain.Encrypted || !c.Encrypted.Encrypted || c.Encrypted.CheckpointRows != 21 || c.Ratio <= 0 || c.MedianRatio <= 0 || c.CPURatio <= 0 {
		t.Fatalf("bench output %s: %+v %v", out, c, err)
	}
	if code, out, _ := cli(t, nil, "bench", "w1", "--steps", "5", "--encryption", "both", "--rounds", "1"); code != 0 || !strings.Contains(out, "encryption at rest:") || !strings.Contains(out, "w1 encrypted") {
		t.Fatalf("bench text: %d %s", code, out)
	}
	if code, _, errOut := cli(t, nil, "bench", "w1", "--encryption", "maybe"); code != 2 || !strings.Contains(errOut, "--encryption") {
		t.Fatalf("bad --encryption: %d %s", code, errOut)
	}
}

// TestServeEncrypted runs an agent through cairn serve on an encrypted
// store: the API answers with the state, the run and its replayed events,
// while the database's bytes (checkpoints, run records, run events) hold
// none of the run's text.
func TestServeEncrypted(t *testing.T) {
	dir := encDir(t)
	db := filepath.Join(t.TempDir(), "serve.db")
	p := startServeCmd(t, cairnProcess(t, []string{"CAIRN_ENCRYPTION_KEYS=" + testKey(3)}, "serve", "--addr", "127.0.0.1:0", "--assistants", dir, "--store", "sqlite:"+db))
	var shown bytes.Buffer
	p.call(t, "POST", "/threads", map[string]any{"thread_id": "t"}, nil)
	body, _ := json.Marshal(map[string]any{"assistant_id": "enc", "input": "input " + encMarker, "stream_mode": []string{"values", "messages-tuple"}})
	res, err := http.Post(p.url+"/threads/t/runs/stream", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(&shown, res.Body)
	res.Body.Close()
	var runs []struct {
		RunID string `json:"run_id"`
	}
	p.call(t, "GET", "/threads/t/runs", nil, &runs)
	if len(runs) != 1 {
		t.Fatalf("runs: %+v", runs)
	}
	var st json.RawMessage
	p.call(t, "GET", "/threads/t/state", nil, &st)
	shown.Write(st)
	replay, err := http.Get(p.url + "/threads/t/runs/" + runs[0].RunID + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	events, _ := io.ReadAll(replay.Body)
	replay.Body.Close()
	if !bytes.Contains(st, []byte(encMarker)) || !bytes.Contains(events, []byte(encMarker)) {
		t.Fatalf("the API does not show the run's text:\nstate %s\nevents %s", st, events)
	}
	p.stop(syscall.SIGTERM)
	if bytes.Contains(storeBytes(t, db), []byte(encMarker)) {
		t.Fatal("the database file holds the run's text")
	}
	// The run log is sealed too: without the key, cairn runs refuses.
	if code, out, errOut := cli(t, map[string]string{"CAIRN_STORE": "sqlite:" + db}, "runs", runs[0].RunID); code == 0 || strings.Contains(out+errOut, encMarker) {
		t.Fatalf("cairn runs without the key: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := cli(t, map[string]string{"CAIRN_STORE": "sqlite:" + db, "CAIRN_ENCRYPTION_KEYS": testKey(3)}, "runs", runs[0].RunID); code != 0 {
		t.Fatalf("cairn runs with the key: %d %s %s", code, out, errOut)
	}
}

// TestRunQueueEncrypted queues a run on an encrypted PostgreSQL store
// (cairn run --queue) for a worker with the same key: the run completes,
// its state reads back with the key, and no column — checkpoints, run
// records, events, River's jobs — holds its input in the clear; the same
// search finds it in a plaintext store.
func TestRunQueueEncrypted(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		found     bool
	}{{"plaintext", "", true}, {"encrypted", testKey(4), false}} {
		t.Run(tc.name, func(t *testing.T) {
			dsn, schema := pgtest.Schema(t, "cairn_rqe")
			env := map[string]string{"CAIRN_ENCRYPTION_KEYS": tc.key}
			queueEncrypted(t, dsn, env)
			if found := searchPostgres(t, dsn, schema, encMarker); (found > 0) != tc.found {
				t.Fatalf("%d columns hold the run's input; want some: %v", found, tc.found)
			}
		})
	}
}

// queueEncrypted runs five-steps.md queued for a worker, both with env.
func queueEncrypted(t *testing.T, dsn string, env map[string]string) {
	t.Helper()
	assistants := filepath.Join("..", "..", "examples", "serve")
	startChild(t, cairnProcess(t, []string{"CAIRN_ENCRYPTION_KEYS=" + env["CAIRN_ENCRYPTION_KEYS"]}, "worker", "--log-level", "info", "--id", "w1", "--assistants", assistants, "--store", dsn, "--lease", "1s", "--rescue-after", "2s"), "taking runs of")
	code, stdout, stderr := cli(t, env, "run", filepath.Join(assistants, "five-steps.md"), "--queue", "--input-text", encMarker, "--thread", "rqe", "--store", dsn, "--json")
	var q struct {
		RunID string `json:"run_id"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &q) != nil || q.RunID == "" {
		t.Fatalf("run --queue: %d %s %s", code, stdout, stderr)
	}
	crashtest.WaitFor(t, 20*time.Second, "the queued run to finish", func() bool {
		_, out, _ := cli(t, env, "runs", q.RunID, "--store", dsn, "--json")
		var v runView
		return json.Unmarshal([]byte(out), &v) == nil && v.Status == "success"
	})
	if code, out, _ := cli(t, env, "state", "rqe", "--store", dsn); code != 0 || !strings.Contains(out, encMarker) {
		t.Fatalf("state: %d\n%s", code, out)
	}
}

// searchPostgres counts the columns of Cairn's blobs and River's jobs
// that hold text.
func searchPostgres(t *testing.T, dsn, schema, text string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	found := 0
	for _, c := range []struct{ table, column string }{
		{"cairn_checkpoints", "patch"}, {"cairn_checkpoints", "coalesce(meta, '')"}, {"cairn_snapshots", "data"}, {"cairn_writes", "data"},
		{"cairn_runs", "data"}, {"cairn_run_events", "data"}, {"river_job", "convert_to(args::text, 'UTF8')"},
	} {
		var n int
		q := fmt.Sprintf(`SELECT count(*) FROM %s.%s WHERE position(convert_to($1, 'UTF8') IN %s) > 0`, schema, c.table, c.column)
		if err := conn.QueryRow(context.Background(), q, text).Scan(&n); err != nil {
			t.Fatalf("%s: %v", c.table, err)
		}
		if n > 0 {
			t.Logf("%d rows of %s hold the text in %s", n, c.table, c.column)
			found++
		}
	}
	return found
}
