package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/store"
)

// runOptions is what a run was started with. cairn run keeps it in the
// thread's metadata and cairn resume uses it, so a resumed run finishes on
// the model, durability and confinement it started with. It never holds a
// secret: model specs name a script file, a model and a base URL without
// credentials; keys stay in environment variables.
type runOptions struct {
	Kind       string // "agent", "chat" or "pipeline"
	File       string // absolute path of the agent or pipeline file
	Model      string // --model spec; empty: the file's own model
	Durability string // --durability
	SafeDir    string // --safe-dir: the directory the run may reach (absolute)
}

// Metadata keys of runOptions.
const (
	metaKind       = "kind"
	metaFile       = "file"
	metaModel      = "model"
	metaDurability = "durability"
	metaSafeDir    = "safe_dir"
)

// metadata is the thread metadata recording o.
func (o runOptions) metadata() map[string]any {
	m := map[string]any{metaKind: o.Kind, metaFile: o.File}
	for k, v := range map[string]string{metaModel: o.Model, metaDurability: o.Durability, metaSafeDir: o.SafeDir} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

// runOptionsOf reads the run options a thread's metadata records.
func runOptionsOf(th store.Thread) runOptions {
	get := func(k string) string {
		v, _ := th.Metadata[k].(string)
		return v
	}
	return runOptions{Kind: get(metaKind), File: get(metaFile), Model: get(metaModel), Durability: get(metaDurability), SafeDir: get(metaSafeDir)}
}

// errThreadBusy: cairn run --thread names a thread whose last run has not
// finished, or that another file runs.
var errThreadBusy = errors.New("thread is not free for a new run")

// checkRunThread decides whether a new run of o may start on an existing
// thread: the same file, and the last run finished (a failed, interrupted,
// crashed or forked run is continued with cairn resume, never silently
// abandoned). A missing thread is free.
func checkRunThread(ctx context.Context, s store.Store, thread string, o runOptions) error {
	th, err := s.Thread(ctx, thread)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return argError(err)
	}
	prev := runOptionsOf(th)
	if prev.File == "" {
		return &usageError{fmt.Errorf("%w: thread %q was not started by cairn run; choose another --thread", errThreadBusy, thread)}
	}
	if prev.Kind != o.Kind || prev.File != o.File {
		return &usageError{fmt.Errorf("%w: thread %q runs %s; run that file on it, or choose another --thread", errThreadBusy, thread, prev.File)}
	}
	if th.Head == 0 {
		return nil // created, but its first run never committed a step
	}
	list, err := s.Namespaces(ctx, thread)
	if err != nil {
		return err
	}
	for _, n := range list {
		head, err := s.Load(ctx, store.LoadRequest{Thread: thread, Namespace: n.Name})
		if err != nil {
			return err
		}
		if agentfile.Unfinished(head) {
			return fmt.Errorf("%w: thread %q has an unfinished run (namespace %s checkpoint %d, %s; or another process is running it): continue it with cairn resume %s, or leave out --thread to start a new thread",
				errThreadBusy, thread, orRoot(n.Name), head.Seq, head.Status, thread)
		}
	}
	return nil
}
