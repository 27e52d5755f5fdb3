package agentfile_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestMemoryFileErrors: memory: and the memory tools are checked when the
// file is parsed, with the line of what is wrong.
func TestMemoryFileErrors(t *testing.T) {
	head := "---\nname: m\nmodel: {provider: scripted, script: r.yaml}\n"
	body := "---\n## Instructions\nx\n"
	for _, tc := range []struct{ name, front, want string }{
		{"tool without namespace", "tools:\n  - read_file\n  - memory_put\n", "demo.md:6: tools: memory_put needs memory.namespace"},
		{"memory without tools", "tools: [read_file]\nmemory:\n  namespace: [a]\n", "demo.md:5: memory: is set but tools: lists no memory tool"},
		{"unknown variable", "tools: [memory_get]\nmemory:\n  namespace:\n    - users\n    - \"{user}\"\n", "demo.md:8: memory.namespace[1] \"{user}\": unknown {user}"},
		{"period", "tools: [memory_get]\nmemory:\n  namespace: [a.b]\n", "demo.md:6: memory.namespace[0] \"a.b\": labels cannot hold periods"},
		{"unbalanced", "tools: [memory_get]\nmemory:\n  namespace: [\"x{agent\"]\n", "a { without its }"},
		{"langgraph root", "tools: [memory_get]\nmemory:\n  namespace: [langgraph, x]\n", `demo.md:5: store: invalid argument: memory.namespace: the first label cannot be "langgraph"`},
		{"empty label", "tools: [memory_get]\nmemory:\n  namespace: [a, \"\"]\n", "memory.namespace[1] is empty"},
		{"negative ttl", "tools: [memory_put]\nmemory:\n  namespace: [a]\n  ttl: -1\n", "demo.md:5: memory.ttl -1"},
		{"search limit", "tools: [memory_search]\nmemory:\n  namespace: [a]\n  search_limit: 99\n", "memory.search_limit 99: want 1 to 50"},
		{"unknown key", "tools: [memory_search]\nmemory:\n  namespaces: [a]\n", `unknown front-matter key "namespaces"`},
		{"dotted name", "tools: [memory.put]\n", `tools: "memory.put" names MCP server "memory"`},
	} {
		_, err := agentfile.Parse("demo.md", []byte(head+tc.front+body))
		if !errors.Is(err, agentfile.ErrInvalidFile) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	a, err := agentfile.Parse("demo.md", []byte(head+"tools: [memory_put, memory_get, memory_search, memory_delete]\nmemory:\n  namespace: [users, \"{metadata.user}\", \"{agent}-notes\", \"t-{thread}\"]\n  ttl: 90\n"+body))
	if err != nil || a.Memory.TTL != 90 || len(a.Memory.Namespace) != 4 {
		t.Fatalf("a good memory: section: %+v, %v", a.Memory, err)
	}
	for _, name := range []string{"memory_put", "memory_get", "memory_search", "memory_delete"} {
		if !strings.Contains(strings.Join(agentfile.BuiltinTools(), ","), name) {
			t.Errorf("BuiltinTools lacks %s", name)
		}
	}
}

const memoryAgent = `---
name: memo
model: {provider: scripted, script: unused.yaml}
tools: [memory_put, memory_get, memory_search, memory_delete]
memory:
  namespace: [users, "{metadata.user}", notes]
---
## Instructions
Remember what the user likes.
`

// runMemory runs the memory agent on a thread (created with metadata
// user when user is not empty) with a script, and returns its output.
func runMemory(t *testing.T, a *agentfile.File, s store.Store, thread, user, script string) string {
	t.Helper()
	m, err := scripted.Parse("script.yaml", []byte(script))
	if err != nil {
		t.Fatal(err)
	}
	cfg := agentfile.RunConfig{Store: s, Thread: thread, Model: m, Input: agentfile.TextInput("inline", "hi")}
	if user != "" {
		cfg.NewThread = map[string]any{"user": user}
	}
	res, err := agentfile.Run(context.Background(), a, cfg)
	if err != nil {
		t.Fatalf("run on %s: %v", thread, err)
	}
	var out string
	_ = json.Unmarshal(res.FinalOutput, &out)
	return out
}

// TestMemoryTools: an item memory_put writes on one thread is found by
// memory_search and memory_get on another thread of the same user, in the
// namespace memory: names (periods of the user id made underscores), and
// not by another user's; secrets in it are redacted; memory_delete
// forgets it.
func TestMemoryTools(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "memo.md")
	if err := os.WriteFile(p, []byte(memoryAgent), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := agentfile.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	s := inmem.Open(store.Options{})
	put := "replies:\n  - tool_calls: [{name: memory_put, args: {key: tea, value: {text: Ada likes green tea, api_key: sk-live-0123456789abcdefghij}}}]\n  - echo_tool: true\n"
	if got := runMemory(t, a, s, "monday", "ada.lovelace", put); got != `{"stored":"tea"}` {
		t.Fatalf("put: %s", got)
	}
	search := "replies:\n  - tool_calls: [{name: memory_search, args: {query: GREEN}}]\n  - echo_tool: true\n"
	if got := runMemory(t, a, s, "tuesday", "ada.lovelace", search); !strings.Contains(got, `"key":"tea"`) || !strings.Contains(got, "Ada likes green tea") || strings.Contains(got, "sk-live") {
		t.Fatalf("search from another thread: %s", got)
	}
	if got := runMemory(t, a, s, "wednesday", "grace", search); got != "[]" {
		t.Fatalf("another user's search: %s", got)
	}
	if got := runMemory(t, a, s, "thursday", "", search); !strings.Contains(got, `thread "thursday" has no metadata user`) {
		t.Fatalf("a thread without the metadata: %s", got)
	}
	all, err := store.ItemsOf(s)
	if err != nil {
		t.Fatal(err)
	}
	it, err := all.Get(context.Background(), store.GetOp{Namespace: []string{"users", "ada_lovelace", "notes"}, Key: "tea"})
	if err != nil || it.Value["api_key"] != "[REDACTED]" {
		t.Fatalf("the stored item: %+v, %v", it, err)
	}
	del := "replies:\n  - tool_calls: [{name: memory_delete, args: {key: tea}}]\n  - tool_calls: [{name: memory_get, args: {key: tea}}]\n  - echo_tool: true\n"
	if got := runMemory(t, a, s, "friday", "ada.lovelace", del); got != "null" {
		t.Fatalf("get after delete: %s", got)
	}
}

// TestMemoryThreadOfTenant: {thread} is the thread's own id, not the key
// a tenant's thread is kept under (tenant/id), and the item goes to the
// thread's tenant.
func TestMemoryThreadOfTenant(t *testing.T) {
	a, err := agentfile.Parse("memo.md", []byte(strings.Replace(memoryAgent, `[users, "{metadata.user}", notes]`, `[notes, "t-{thread}"]`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	s := inmem.Open(store.Options{})
	put := "replies:\n  - tool_calls: [{name: memory_put, args: {key: tea, value: {text: green}}}]\n  - echo_tool: true\n"
	if got := runMemory(t, a, s, store.ThreadKey("acme", "monday"), "", put); got != `{"stored":"tea"}` {
		t.Fatalf("put: %s", got)
	}
	all, err := store.ItemsOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := all.Get(context.Background(), store.GetOp{Tenant: "acme", Namespace: []string{"notes", "t-monday"}, Key: "tea"}); err != nil {
		t.Fatalf("the item in the tenant's namespace of the thread's id: %v", err)
	}
}

// TestMemoryFromRunConfig: {configurable.KEY} and {context.KEY} are filled
// from the run's config and context (flow.RunConfigOf), as a LangGraph
// app namespaces memories by config's user_id; a run without them gets the
// error as the tool's result.
func TestMemoryFromRunConfig(t *testing.T) {
	a, err := agentfile.Parse("memo.md", []byte(strings.Replace(memoryAgent, `[users, "{metadata.user}", notes]`, `[users, "{configurable.user_id}", "{context.org}"]`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	s := inmem.Open(store.Options{})
	run := func(thread string, rc flow.RunConfig) string {
		m, err := scripted.Parse("script.yaml", []byte("replies:\n  - tool_calls: [{name: memory_put, args: {key: tea, value: {text: green}}}]\n  - echo_tool: true\n"))
		if err != nil {
			t.Fatal(err)
		}
		ctx := flow.WithRunConfig(context.Background(), rc)
		res, err := agentfile.Run(ctx, a, agentfile.RunConfig{Store: s, Thread: thread, Model: m, Input: agentfile.TextInput("inline", "hi")})
		if err != nil {
			t.Fatal(err)
		}
		var out string
		_ = json.Unmarshal(res.FinalOutput, &out)
		return out
	}
	if got := run("t1", flow.RunConfig{Configurable: map[string]any{"user_id": "ada.l"}, Context: json.RawMessage(`{"org": "acme"}`)}); got != `{"stored":"tea"}` {
		t.Fatalf("put: %s", got)
	}
	all, err := store.ItemsOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := all.Get(context.Background(), store.GetOp{Namespace: []string{"users", "ada_l", "acme"}, Key: "tea"}); err != nil {
		t.Fatalf("the item in users/ada_l/acme: %v", err)
	}
	if got := run("t2", flow.RunConfig{Configurable: map[string]any{"user_id": "ada"}}); !strings.Contains(got, "the run has no context org") {
		t.Fatalf("a run without the context: %s", got)
	}
}
