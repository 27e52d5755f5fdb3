package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestPipelineStopsAtFailedFileWrite: when the files cannot be written
// after gate 1's commit (its thread folder turned into a file), the run
// stops with ErrFiles after the gate whose files failed: the later gates
// never run. Once the cause is gone, a resume writes the files and runs
// the rest, each gate once, and the files match the store. WriteFiles
// brings a finished pipeline's lost files back from the store.
func TestPipelineStopsAtFailedFileWrite(t *testing.T) {
	p := loadPipeline(t, "name: fw\nmetadata: {domain: d, feature: f}\ngates:\n"+
		"  - {gate: 1, name: A, step: s}\n  - {gate: 2, name: B, step: s}\n  - {gate: 3, name: C, step: s}\n")
	runs := 0
	steps := map[string]pipeline.GateStep{"s": func(context.Context, json.RawMessage) (json.RawMessage, error) {
		runs++
		return json.RawMessage(`{"ok":true}`), nil
	}}
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	folder := p.StateDirOf("t")
	block := func(r pipeline.GateReport) {
		if r.File.Gate == 1 { // the folder becomes a file: gate 2's files cannot be written
			if err := os.RemoveAll(folder); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(folder, []byte("in the way"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err := pipeline.Run(ctx, p, pipeline.Config{Store: s, Thread: "t", Steps: steps, OnGate: block})
	if !errors.Is(err, pipeline.ErrFiles) {
		t.Fatalf("run with a blocked folder: %v", err)
	}
	head, err := s.Load(ctx, store.LoadRequest{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var pf pipeline.File
	if err := head.State.Get("pipeline", &pf); err != nil || runs != 2 || !slices.Equal(pf.CompletedGates, []int{1, 2}) {
		t.Fatalf("after the failed write: %d gates ran, the store has %v (%v); want 2 and [1 2]", runs, pf.CompletedGates, err)
	}

	if err := os.Remove(folder); err != nil {
		t.Fatal(err)
	}
	res, err := pipeline.Run(ctx, p, pipeline.Config{Store: s, Thread: "t", Steps: steps})
	if err != nil || res.Pipeline.Status != pipeline.GateSuccess || runs != 3 {
		t.Fatalf("resume: %v, %+v, %d gate runs", err, res.Pipeline, runs)
	}
	exp := t.TempDir()
	if _, err := pipeline.ExportGateFiles(ctx, s, "t", exp); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, folder, exp)

	// A finished pipeline's files, lost: WriteFiles writes them again.
	if err := os.Remove(p.GateFilePath("t", 3)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.PipelineFilePath("t"), []byte(`{"status":"IN_PROGRESS"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	paths, err := p.WriteFiles(ctx, s, "t")
	if err != nil || len(paths) != 4 {
		t.Fatalf("WriteFiles: %v %v", paths, err)
	}
	sameFiles(t, folder, exp)
}

// loadPipeline writes a pipeline file in a new folder and loads it.
func loadPipeline(t *testing.T, src string) *pipeline.Pipeline {
	t.Helper()
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
