package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/tracefile"
)

// readManifest reads dir/manifest.json as JSON and as its bytes.
func readManifest(t *testing.T, dir string) (map[string]any, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m, b
}

// TestLoopAgentTaskInManifest: a task's id and metadata (QitOS: "Used in
// trace artifacts", "stored in the trace manifest") are in manifest.json,
// written live and exported alike; a task without metadata has {}.
func TestLoopAgentTaskInManifest(t *testing.T) {
	tests := []struct {
		name     string
		metadata map[string]any
		want     map[string]any
	}{
		{"metadata", map[string]any{"benchmark": "papers", "split": "dev", "owner": map[string]any{"team": "<search>"}},
			map[string]any{"benchmark": "papers", "split": "dev", "owner": map[string]any{"team": "<search>"}}},
		{"none", nil, map[string]any{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := inmem.Open(store.Options{})
			task := researchTask
			task.ID, task.Metadata = "research-001", tc.metadata
			em, eb := tracedRun(t, ctx, st, "r", func(opts flow.Options) error {
				_, err := researcher(t).Run(ctx, st, "r", task, opts)
				return err
			})
			if em["task_id"] != "research-001" || !reflect.DeepEqual(em["metadata"], tc.want) || em["status"] != "completed" {
				t.Fatalf("manifest %s: want task_id research-001, metadata %v", eb, tc.want)
			}
			if bytes.Contains(eb, []byte(`\u003c`)) || tc.name == "metadata" && !bytes.Contains(eb, []byte(`"<search>"`)) {
				t.Fatalf("manifest %s: HTML-escaped, not as written", eb)
			}
		})
	}
}

// tracedRun runs run with a live trace of thread (its options carry the
// trace's observer), checks that the live manifest is what Export writes
// afterwards, and returns it.
func tracedRun(t *testing.T, ctx context.Context, st store.Store, thread string, run func(opts flow.Options) error) (map[string]any, []byte) {
	t.Helper()
	live := filepath.Join(t.TempDir(), "live")
	l, err := tracefile.NewLive(ctx, st, thread, live)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(flow.Options{Observer: l.Observer(ctx)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	exported := filepath.Join(t.TempDir(), "export")
	if _, err := tracefile.Export(ctx, st, thread, exported); err != nil {
		t.Fatal(err)
	}
	lm, lb := readManifest(t, live)
	if _, eb := readManifest(t, exported); string(lb) != string(eb) {
		t.Fatalf("live manifest\n%s\nexported\n%s", lb, eb)
	}
	return lm, lb
}
