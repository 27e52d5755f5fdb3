package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// TestRacingAssistantUpdates: two services on one database file, as two
// processes of a deployment, update one assistant at once: every update
// is a version of its own, numbered without a gap, none lost.
func TestRacingAssistantUpdates(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	g, err := flow.NewGraph(state.MustSchema(state.WithField("x", state.ReducerReplace))).
		AddNode("n", func(context.Context, state.Doc) (state.Update, error) { return state.Update{"x": 1}, nil }).
		AddEdge(flow.START, "n").Compile()
	if err != nil {
		t.Fatal(err)
	}
	var svcs []*runs.Service
	for range 2 {
		s, err := sqlite.OpenStore(ctx, path, sqlite.Options{}, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		svc, err := runs.New(runs.Config{Store: s, Assistants: []runs.Assistant{&runs.Graph{ID: "g", Graph: g}}})
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc)
	}
	a, err := svcs[0].CreateAssistant(ctx, runs.AssistantCreate{GraphID: "g"})
	if err != nil {
		t.Fatal(err)
	}
	const each = 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for i, svc := range svcs {
		for j := range each {
			wg.Go(func() {
				_, err := svc.PatchAssistant(ctx, a.AssistantID, runs.AssistantPatch{Metadata: map[string]any{"by": fmt.Sprintf("%d-%d", i, j)}})
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	vs, err := svcs[1].AssistantVersions(ctx, a.AssistantID, nil, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2*each+1 {
		t.Fatalf("%d versions, want %d", len(vs), 2*each+1)
	}
	seen := map[string]bool{}
	for i, v := range vs {
		if v.Version != len(vs)-i {
			b, _ := json.Marshal(vs)
			t.Fatalf("version %d at %d: %s", v.Version, i, b)
		}
		if by, ok := v.Metadata["by"].(string); ok {
			seen[by] = true
		}
	}
	// A version's metadata merges its update into the one before, so the
	// last writer's mark is on it: each update's mark is on one version.
	if len(seen) != 2*each {
		t.Fatalf("%d updates left their mark, want %d: %v", len(seen), 2*each, seen)
	}
}
