package tracefile_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/tracefile"
)

func manifestStatus(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m tracefile.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m.Status
}

// A live trace says "running" while the run goes on, and leaves exactly
// what Export writes afterwards — for a run that completes and for one that
// stops at an interrupt and is resumed.
func TestLive(t *testing.T) {
	schema := state.MustSchema(state.WithField("log", state.ReducerAppend))
	step := func(name string) flow.NodeFunc {
		return func(ctx context.Context, d state.Doc) (state.Update, error) {
			flow.Annotate(ctx, "step_record", map[string]any{"observation": name})
			return state.Update{"log": name}, nil
		}
	}
	g, _ := flow.NewGraph(schema).AddNode("plan", step("plan")).AddNode("act", step("act")).AddNode("check", step("check")).
		Chain("plan", "act", "check").Compile()
	s := inmem.Open(store.Options{})
	ctx := context.Background()
	live := filepath.Join(t.TempDir(), "live")
	l, err := tracefile.NewLive(ctx, s, "t", live)
	if err != nil {
		t.Fatal(err)
	}
	observe := l.Observer(ctx)
	var during []string
	r, _ := flow.NewRunner(g, s, flow.Options{InterruptBefore: []string{"check"}, Observer: func(ev flow.Event) {
		observe(ev)
		if ev.Kind == flow.EventCheckpoint && ev.Seq == 2 {
			during = append(during, manifestStatus(t, live))
		}
	}})
	so := flow.StreamOptions{Modes: []flow.StreamMode{flow.StreamCheckpoints}}
	for _, err := range r.Stream(ctx, "t", state.Update{"log": "start"}, so) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(during) != 1 || during[0] != "running" || manifestStatus(t, live) != "stopped" {
		t.Fatalf("manifest while running %v, after the interrupt %q", during, manifestStatus(t, live))
	}
	same(t, ctx, s, live)
	// Resume with a new live trace of the same thread: it writes the
	// history so far, then the rest.
	if l, err = tracefile.NewLive(ctx, s, "t", live); err != nil {
		t.Fatal(err)
	}
	r2, _ := flow.NewRunner(g, s, flow.Options{Observer: l.Observer(ctx)})
	for _, err := range r2.StreamResume(ctx, "t", nil, so) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if manifestStatus(t, live) != "completed" {
		t.Fatalf("status after the run: %s", manifestStatus(t, live))
	}
	same(t, ctx, s, live)
}

// same checks that dir holds what Export writes now.
func same(t *testing.T, ctx context.Context, s store.Store, dir string) {
	t.Helper()
	exported := filepath.Join(t.TempDir(), "export")
	if _, err := tracefile.Export(ctx, s, "t", exported); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"manifest.json", "events.jsonl", "steps.jsonl"} {
		a, _ := os.ReadFile(filepath.Join(dir, f))
		b, _ := os.ReadFile(filepath.Join(exported, f))
		if string(a) != string(b) || len(a) == 0 {
			t.Fatalf("%s differs from the export:\n%s\nexport:\n%s", f, a, b)
		}
	}
}
