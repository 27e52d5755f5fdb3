package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/spec"
	"github.com/cairn-dev/cairn/store"
)

// runPipeline runs or resumes a gate pipeline on a thread.
func (a *app) runPipeline(cmd *cobra.Command, path, thread, modelSpec string) error {
	p, err := spec.LoadPipeline(path)
	if err != nil {
		return &usageError{err}
	}
	var model agent.Model
	if modelSpec != "" {
		if model, err = parseModel(modelSpec); err != nil {
			return err
		}
	}
	if thread == "" {
		thread = spec.ThreadID(p.Name)
	}
	if err := store.ValidateThreadID(thread); err != nil {
		return &usageError{fmt.Errorf("--thread: %w", err)}
	}
	s, err := a.open()
	if err != nil {
		return err
	}
	defer s.Close()
	if err := ensureThread(cmd.Context(), s, thread, "pipeline", path); err != nil {
		return err
	}
	if !a.json {
		fmt.Fprintf(a.stderr, "running pipeline %s on thread %q; state files in %s\n", p.Name, thread, filepath.Dir(p.PipelineFilePath()))
	}
	res, err := spec.RunPipeline(cmd.Context(), p, spec.PipelineConfig{Store: s, Thread: thread, Model: model, Observer: a.progress(),
		Warn: func(w string) { fmt.Fprintln(a.stderr, "  ! "+w) }})
	if err != nil {
		return fmt.Errorf("%w (thread %q: fix the cause and run cairn resume %s)", err, thread, thread)
	}
	if a.json {
		return a.printJSON(map[string]any{"thread": thread, "pipeline": res.Pipeline, "pipeline_file": p.PipelineFilePath()})
	}
	fmt.Fprintf(a.stdout, "pipeline %s: %s, gates %v completed; %s\n", p.Name, res.Pipeline.Status, res.Pipeline.CompletedGates, p.PipelineFilePath())
	return nil
}
