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
	metaKind       = agentfile.MetaKind
	metaFile       = agentfile.MetaFile
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
// thread (agentfile.CheckStart): the same file, and the last run finished
// (a failed, interrupted, crashed or forked run is continued with cairn
// resume, never silently abandoned). A missing thread is free.
func checkRunThread(ctx context.Context, s store.Store, thread string, o runOptions) error {
	_, err := agentfile.CheckStart(ctx, s, agentfile.StartRequest{Thread: thread, Kind: o.Kind, File: o.File, Namespaces: true,
		Continue: o.Kind == agentfile.KindPipeline})
	return startError(err, thread)
}

// startError phrases agentfile.CheckStart's refusal for cairn run.
func startError(err error, thread string) error {
	se, ok := errors.AsType[*agentfile.StartError](err)
	switch {
	case !ok:
		return argError(err)
	case errors.Is(se.Err, agentfile.ErrUnfinished):
		return fmt.Errorf("%w: thread %q has an unfinished run (namespace %s checkpoint %d, %s; or another process is running it): continue it with cairn resume %s, or leave out --thread to start a new thread",
			errThreadBusy, thread, orRoot(se.Namespace), se.Head.Seq, se.Head.Status, thread)
	case se.File == "":
		return &usageError{fmt.Errorf("%w: thread %q was not started by cairn run; choose another --thread", errThreadBusy, thread)}
	}
	return &usageError{fmt.Errorf("%w: thread %q runs %s; run that file on it, or choose another --thread", errThreadBusy, thread, se.File)}
}
