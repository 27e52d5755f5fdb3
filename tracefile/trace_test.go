package tracefile_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/tracefile"
)

func lines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}

func TestExport(t *testing.T) {
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	schema := state.MustSchema(state.WithField("notes", state.ReducerAppend))
	fail := true
	g := flow.NewGraph(schema).
		AddNode("think", func(ctx context.Context, d state.Doc) (state.Update, error) {
			flow.AddTokens(ctx, 100, 20)
			return state.Update{"notes": "idea"}, nil
		}).
		AddNode("answer", func(ctx context.Context, d state.Doc) (state.Update, error) {
			if fail {
				return nil, errors.New("budget service down")
			}
			return state.Update{"final_result": "42"}, nil
		}).
		Chain("think", "answer")
	c, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	r, err := flow.NewRunner(c, s, flow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Invoke(ctx, "run-1", state.Update{"task": "answer"}); err == nil {
		t.Fatal("expected a failure")
	}
	dir := t.TempDir()
	m, err := tracefile.Export(ctx, s, "run-1", dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != "failed" || m.Summary.StopReason != "unrecoverable_error" || m.Summary.FailureReport == nil || m.Summary.FailureReport.Nodes[0] != "answer" || m.RunID == "" {
		t.Fatalf("failed manifest %+v", m)
	}
	fail = false
	if _, err := r.Resume(ctx, "run-1", nil); err != nil {
		t.Fatal(err)
	}
	if m, err = tracefile.Export(ctx, s, "run-1", dir); err != nil {
		t.Fatal(err)
	}
	if m.Status != "completed" || m.Summary.StopReason != "final" || string(m.Summary.FinalResult) != `"42"` || m.Summary.Steps != 4 {
		t.Fatalf("manifest %+v", m)
	}
	var onDisk tracefile.Manifest
	b, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err := json.Unmarshal(b, &onDisk); err != nil || onDisk.Status != "completed" {
		t.Fatalf("manifest.json: %s %v", b, err)
	}
	events := lines(t, filepath.Join(dir, "events.jsonl"))
	phases := ""
	for _, e := range events {
		phases += e["phase"].(string) + " "
		for _, k := range []string{"run_id", "step_id", "phase", "ok", "payload", "ts"} {
			if _, ok := e[k]; !ok {
				t.Fatalf("event lacks %s: %v", k, e)
			}
		}
	}
	if phases != "input step error step " {
		t.Fatalf("phases %q", phases)
	}
	steps := lines(t, filepath.Join(dir, "steps.jsonl"))
	think := steps[1]
	diff := think["state_diff"].(map[string]any)["notes"].(map[string]any)
	if diff["before"] != nil || diff["after"].([]any)[0] != "idea" || think["tokens"].(map[string]any)["input"].(float64) != 100 {
		t.Fatalf("think step %v", think)
	}
	if _, err := tracefile.Export(ctx, s, "nope", dir); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing thread: %v", err)
	}
}
