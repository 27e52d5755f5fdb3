package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/internal/embedtest"
	"github.com/cairn-dev/cairn/internal/pgtest"
)

const memoAgent = `---
name: memo
model: {provider: scripted, script: scripts/put.yaml}
tools: [memory_put, memory_search, memory_get]
memory:
  namespace: [notes, "{agent}"]
  ttl: 60
---
## Instructions
Remember what the user likes, and recall it.
`

// memoFiles writes the memo agent and its scripts: put.yaml stores a note
// (with a secret in it), search.yaml searches for it and answers what the
// search found.
func memoFiles(t *testing.T, dir string) string {
	t.Helper()
	files := map[string]string{
		"memo.md":             memoAgent,
		"scripts/put.yaml":    "replies:\n  - tool_calls: [{name: memory_put, args: {key: tea, value: {text: Ada likes green tea, token: sk-live-0123456789abcdefghij}}}]\n  - echo_tool: true\n",
		"scripts/search.yaml": "replies:\n  - tool_calls: [{name: memory_search, args: {query: green tea}}]\n  - echo_tool: true\n",
	}
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "memo.md")
}

// TestMemoryAcrossThreads: cairn run FILE with the scripted model; the
// memory_put of a run on thread monday is found by the memory_search of
// a run on thread tuesday; the secret in the note is in no byte of the
// store.
func TestMemoryAcrossThreads(t *testing.T) {
	dir := t.TempDir()
	file := memoFiles(t, dir)
	db := filepath.Join(dir, "state.db")
	wantCLI(t, 0, []string{`{"stored":"tea"}`}, "run", file, "--thread", "monday", "--store", "sqlite:"+db)
	out := wantCLI(t, 0, []string{"Ada likes green tea", `"key":"tea"`}, "run", file, "--thread", "tuesday", "--model", "scripted:"+filepath.Join(dir, "scripts", "search.yaml"), "--store", "sqlite:"+db)
	if strings.Contains(out, "sk-live") {
		t.Fatalf("the secret is shown: %s", out)
	}
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(db + suffix)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("sk-live")) {
			t.Fatalf("the secret is stored in %s", db+suffix)
		}
		if suffix == "" && !bytes.Contains(b, []byte("Ada likes green tea")) && !bytes.Contains(fileBytes(db+"-wal"), []byte("Ada likes green tea")) {
			t.Fatal("the note is not in the store at all")
		}
	}
}

// fileBytes reads a file that may not exist (nil).
func fileBytes(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// TestMemoryFileRefused: an agent file listing a memory tool without a
// namespace is refused with its line, exit 2, and nothing is created.
func TestMemoryFileRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bad.md")
	src := "---\nname: bad\nmodel: {provider: scripted, script: scripts/put.yaml}\ntools: [memory_put]\n---\n## Instructions\nx\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "new", "state.db")
	wantCLI(t, 2, []string{"bad.md:4: tools: memory_put needs memory.namespace"}, "run", file, "--store", "sqlite:"+db)
	if _, err := os.Stat(filepath.Dir(db)); !os.IsNotExist(err) {
		t.Fatalf("a refused run created %s: %v", filepath.Dir(db), err)
	}
}

// TestServeMemoryFlags: the index flags are checked before anything is
// opened; the embeddings key's variable is named, never its value.
func TestServeMemoryFlags(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "none", "state.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--store-index-model", "m"}, "needs --store-index-dims"},
		{[]string{"--store-index-dims", "8"}, "need --store-index-model"},
		{[]string{"--store-index-url", "http://127.0.0.1:1/v1"}, "need --store-index-model"},
		{[]string{"--store-index-model", "m", "--store-index-dims", "8", "--store-index-fields", "a[x]"}, `field path "a[x]"`},
		{[]string{"--store-index-fields", " , "}, "name at least one field"},
		{[]string{"--store-ttl-sweep", "-1s"}, "--store-ttl-sweep -1s"},
		{[]string{"--store-index-model", "m", "--store-index-dims", "8", "--store-index-key-env", "CAIRN_TEST_NO_SUCH_KEY"}, "CAIRN_TEST_NO_SUCH_KEY"},
	} {
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", db}, tc.args...)
		wantCLI(t, 2, []string{tc.want}, args...)
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); !os.IsNotExist(err) {
		t.Fatalf("refused flags created the store: %v", err)
	}
}

// TestServeMemoryIndex: cairn serve with an embeddings endpoint (a fake
// speaking OpenAI's wire format) ranks the store API's searches by cosine
// similarity, and an agent file's memory_put run by the server is indexed
// the same way; the endpoint's key reaches the endpoint and no log, no
// answer and no byte of the store.
func TestServeMemoryIndex(t *testing.T) {
	const key = "sk-embed-SECRET-0123456789"
	emb := embedtest.New(t, key)
	dir := t.TempDir()
	memoFiles(t, dir)
	db := filepath.Join(t.TempDir(), "serve.db")
	p := startServeCmd(t, cairnProcess(t, []string{"CAIRN_TEST_EMBED_KEY=" + key},
		"serve", "--addr", "127.0.0.1:0", "--assistants", dir, "--store", "sqlite:"+db, "--log-level", "debug",
		"--store-index-url", emb.URL, "--store-index-model", "embed-test", "--store-index-dims", "8", "--store-index-fields", "text",
		"--store-index-key-env", "CAIRN_TEST_EMBED_KEY"))
	for k, text := range map[string]string{"a": "apple apple banana", "b": "dog cat", "c": "banana cherry"} {
		if code := p.call(t, "PUT", "/store/items", map[string]any{"namespace": []string{"kb"}, "key": k, "value": map[string]any{"text": text, "other": "not indexed"}}, nil); code != 204 {
			t.Fatalf("put %s: %d", k, code)
		}
	}
	var res struct {
		Items []struct {
			Key   string   `json:"key"`
			Score *float64 `json:"score"`
		} `json:"items"`
	}
	if code := p.call(t, "POST", "/store/items/search", map[string]any{"namespace_prefix": []string{"kb"}, "query": "apple"}, &res); code != 200 || len(res.Items) != 3 ||
		res.Items[0].Key != "a" || *res.Items[0].Score < 0.89 || res.Items[1].Key != "b" || *res.Items[1].Score != 0 {
		t.Fatalf("semantic search: %d %+v", code, res)
	}
	var run map[string]any
	if code := p.call(t, "POST", "/runs/wait", map[string]any{"assistant_id": "memo", "input": "hi"}, &run); code != 200 {
		t.Fatalf("run: %d %v", code, run)
	}
	if code := p.call(t, "POST", "/store/items/search", map[string]any{"namespace_prefix": []string{"notes"}, "query": "green tea"}, &res); code != 200 || len(res.Items) != 1 || res.Items[0].Score == nil || *res.Items[0].Score < 0.99 {
		t.Fatalf("the agent's memory, semantically: %d %+v", code, res)
	}
	for _, text := range emb.Texts() {
		if strings.Contains(text, "not indexed") {
			t.Fatalf("a field outside --store-index-fields was embedded: %q", text)
		}
	}
	p.stop(os.Interrupt)
	if strings.Contains(p.logText(), key) {
		t.Fatalf("the embeddings key is in the log:\n%s", p.logText())
	}
	for _, suffix := range []string{"", "-wal"} {
		if bytes.Contains(fileBytes(db+suffix), []byte(key)) {
			t.Fatalf("the embeddings key is stored in %s", db+suffix)
		}
	}
	b, _ := json.Marshal(emb.Requests())
	if !strings.Contains(string(b), "embed-test") {
		t.Fatalf("requests %s", b)
	}
}

// TestLangGraphSDKStore runs server/sdktest/store.test.mjs, written with
// the official LangGraph JS SDK's store client, against a real cairn
// serve whose memory store has a semantic index (the fake embeddings
// endpoint): on SQLite, and on PostgreSQL.
func TestLangGraphSDKStore(t *testing.T) {
	node, dir := sdkSuite(t)
	emb := embedtest.New(t, "")
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			url := "sqlite://" + filepath.Join(t.TempDir(), "serve.db")
			if name == "postgres" {
				url, _ = pgtest.Schema(t, "cairn_sdk_store")
			}
			p := startServe(t, "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", url,
				"--store-index-url", emb.URL, "--store-index-model", "embed-test", "--store-index-dims", fmt.Sprint(embedtest.Dims), "--store-index-fields", "text")
			runNode(t, node, dir, []string{"CAIRN_URL=" + p.url}, "--test", "store.test.mjs")
		})
	}
}

// TestServeSweepsExpiredItems: cairn serve deletes items past their ttl
// every --store-ttl-sweep, not only hides them.
func TestServeSweepsExpiredItems(t *testing.T) {
	db := filepath.Join(t.TempDir(), "serve.db")
	p := startServe(t, "--assistants", filepath.Join("..", "..", "examples", "serve"), "--store", "sqlite:"+db, "--store-ttl-sweep", "50ms")
	for _, k := range []string{"brief", "kept"} {
		body := map[string]any{"namespace": []string{"s"}, "key": k, "value": map[string]any{"v": k}}
		if k == "brief" {
			body["ttl"] = 0.001 // 60 ms
		}
		if code := p.call(t, "PUT", "/store/items", body, nil); code != 204 {
			t.Fatalf("put %s: %d", k, code)
		}
	}
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	crashtest.WaitFor(t, 5*time.Second, "the sweep", func() bool {
		var n int
		return conn.QueryRow(`SELECT count(*) FROM items`).Scan(&n) == nil && n == 1
	})
	var key string
	if err := conn.QueryRow(`SELECT key FROM items`).Scan(&key); err != nil || key != "kept" {
		t.Fatalf("left %q, %v", key, err)
	}
}

// TestLangGraphSDKRunConfig runs server/sdktest/config.test.mjs and
// assistants.test.mjs (assistant CRUD, versions, config into runs), written
// with the official LangGraph JS SDK, against a real cairn serve whose
// agent file namespaces its memory by the run's config and context.
func TestLangGraphSDKRunConfig(t *testing.T) {
	node, dir := sdkSuite(t)
	assistants := t.TempDir()
	files := map[string]string{
		"memo.md":          strings.Replace(memoAgent, `namespace: [notes, "{agent}"]`, `namespace: [notes, "{configurable.user_id}", "{context.org}"]`, 1),
		"scripts/put.yaml": "replies:\n  - tool_calls: [{name: memory_put, args: {key: tea, value: {text: green}}}]\n  - echo_tool: true\n",
	}
	if err := os.MkdirAll(filepath.Join(assistants, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(assistants, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Bad graph defaults stop the server before it opens the store.
	db := filepath.Join(t.TempDir(), "serve.db")
	for _, bad := range []string{`{"memo": 1}`, `{"memo": {"context": "x"}}`, `{"nosuch": {}}`} {
		code, _, errOut := cli(t, map[string]string{"LANGGRAPH_CONFIG": bad}, "serve", "--addr", "127.0.0.1:0", "--assistants", assistants, "--store", "sqlite://"+db)
		if code == 0 || !strings.Contains(errOut, "LANGGRAPH_CONFIG") && !strings.Contains(errOut, "nosuch") {
			t.Fatalf("LANGGRAPH_CONFIG %s: exit %d, %s", bad, code, errOut)
		}
	}
	// A graph's defaults, as LangGraph's LANGGRAPH_CONFIG gives them.
	cmd := cairnProcess(t, []string{`LANGGRAPH_CONFIG={"memo": {"configurable": {"user_id": "default-user"}, "context": {"org": "default-org"}}}`},
		"serve", "--addr", "127.0.0.1:0", "--assistants", assistants, "--store", "sqlite://"+db)
	p := startServeCmd(t, cmd)
	runNode(t, node, dir, []string{"CAIRN_URL=" + p.url}, "--test", "config.test.mjs", "assistants.test.mjs")
}
