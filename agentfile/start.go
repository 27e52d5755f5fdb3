package agentfile

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/store"
)

// Whether a run may start on a thread is decided here, once, for every
// front end: cairn run, the server's runs (package runs) and a file's own
// run (Run). Each says what it knows of the run in a StartRequest.

// The keys of a thread's metadata that name the file its runs run.
const (
	MetaKind = "kind"
	MetaFile = "file"
)

// KindPipeline is the kind a pipeline file's threads record (MetaKind).
const KindPipeline = "pipeline"

// ErrOtherFile: the thread runs another file, or was not started by a
// file's run (a Go graph's thread, for a front end that does not adopt
// threads).
var ErrOtherFile = errors.New("agentfile: the thread runs another file")

// StartRequest describes a new run on a thread, for CheckStart.
type StartRequest struct {
	Thread string
	// Kind and File name the file the run runs (File absolute; Kind
	// "agent", KindChat or KindPipeline, as front ends record it in the
	// thread's metadata): the thread's metadata must name the same one. Empty File: no file is bound (a Go graph, or a
	// file's own run, which its front end checked).
	Kind, File string
	// Adopt: a thread whose metadata names no file takes the run (the
	// server records the file on it); else such a thread is refused.
	Adopt bool
	// Continue: the run continues the thread where it stands (an answer
	// to a pause, a resume, a run from a checkpoint, no input, a
	// pipeline, which always goes on where it stopped), so an unfinished
	// run does not stop it.
	Continue bool
	// Abandon: the run replaces the thread's unfinished one (a multitask
	// strategy of interrupt or rollback), which stays in history.
	Abandon bool
	// Namespaces: an unfinished head in any namespace stops the run, not
	// only the root's (cairn run, which cannot tell a crashed process's
	// subgraph from one another process runs now).
	Namespaces bool
}

// Start is what CheckStart read of the thread: the thread (zero ID when
// missing) and its root head (zero Seq when it has none).
type Start struct {
	Thread store.Thread
	Head   store.Checkpoint
}

// StartError says why a run may not start: Err is ErrOtherFile or
// ErrUnfinished. Front ends add their own advice around it.
type StartError struct {
	Err    error
	Thread string
	// File: the file the thread runs (ErrOtherFile; "" when none).
	File string
	// Namespace and Head: the unfinished head (ErrUnfinished).
	Namespace string
	Head      store.Checkpoint
}

func (e *StartError) Error() string {
	switch {
	case errors.Is(e.Err, ErrUnfinished) && e.Namespace != "":
		return fmt.Sprintf("%v: thread %q namespace %s checkpoint %d (%s)", e.Err, e.Thread, e.Namespace, e.Head.Seq, e.Head.Status)
	case errors.Is(e.Err, ErrUnfinished):
		return fmt.Sprintf("%v: thread %q checkpoint %d (%s)", e.Err, e.Thread, e.Head.Seq, e.Head.Status)
	case e.File == "":
		return fmt.Sprintf("%v: thread %q was not started by a file's run", e.Err, e.Thread)
	}
	return fmt.Sprintf("%v: thread %q runs %s", e.Err, e.Thread, e.File)
}

func (e *StartError) Unwrap() error { return e.Err }

// CheckStart decides whether the run q describes may start on its thread:
// a missing thread is free; else the thread must run q's file (its
// metadata), and its last run must have finished unless q continues or
// replaces it. It returns what it read, so the run starts from that head
// without reading it again.
func CheckStart(ctx context.Context, s store.Store, q StartRequest) (Start, error) {
	th, err := s.Thread(ctx, q.Thread)
	if errors.Is(err, store.ErrNotFound) {
		return Start{}, nil
	}
	if err != nil {
		return Start{}, err
	}
	st := Start{Thread: th}
	if err := checkFile(th, q); err != nil {
		return st, err
	}
	if th.Head == 0 {
		return st, nil // created, but its first run never committed a step
	}
	if st.Head, err = s.Load(ctx, store.LoadRequest{Thread: th.ID}); err != nil {
		return st, err
	}
	if q.Continue || q.Abandon || q.Kind == KindChat {
		return st, nil // a chat's every message is a new turn
	}
	return st, unfinished(ctx, s, st.Head, q)
}

// checkFile applies the file rule of CheckStart.
func checkFile(th store.Thread, q StartRequest) error {
	if q.File == "" {
		return nil
	}
	file, _ := th.Metadata[MetaFile].(string)
	kind, _ := th.Metadata[MetaKind].(string)
	switch {
	case file == "" && q.Adopt:
		return nil
	case file != q.File || (kind != "" && q.Kind != "" && kind != q.Kind):
		return &StartError{Err: ErrOtherFile, Thread: th.ID, File: file}
	}
	return nil
}

// unfinished applies the unfinished rule of CheckStart to the root head,
// and with q.Namespaces to every namespace's.
func unfinished(ctx context.Context, s store.Store, root store.Checkpoint, q StartRequest) error {
	if Unfinished(root) {
		return &StartError{Err: ErrUnfinished, Thread: root.Thread, Head: root}
	}
	if !q.Namespaces {
		return nil
	}
	list, err := s.Namespaces(ctx, root.Thread)
	if err != nil {
		return err
	}
	for _, n := range list {
		if n.Name == "" {
			continue
		}
		head, err := s.Load(ctx, store.LoadRequest{Thread: root.Thread, Namespace: n.Name})
		if err != nil {
			return err
		}
		if Unfinished(head) {
			return &StartError{Err: ErrUnfinished, Thread: root.Thread, Namespace: n.Name, Head: head}
		}
	}
	return nil
}
