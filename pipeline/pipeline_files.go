package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/jsontext"
	"github.com/cairn-dev/cairn/store"
)

// filesOf returns the gate and pipeline files a committed checkpoint makes
// true: the pipeline file and the gates in its state and, when the
// checkpoint records a failed gate step, that gate's FAILED file and a
// FAILED pipeline status.
func filesOf(cp store.Checkpoint) (File, []GateFile, error) {
	var pf File
	if !cp.State.Has("pipeline") {
		return pf, nil, fmt.Errorf("%w: thread %q is not a gate pipeline", agentfile.ErrInvalidFile, cp.Thread)
	}
	if err := cp.State.Get("pipeline", &pf); err != nil {
		return pf, nil, fmt.Errorf("thread %q checkpoint %d: pipeline: %w", cp.Thread, cp.Seq, err)
	}
	if pf.CompletedGates == nil {
		pf.CompletedGates = []int{}
	}
	gates := map[string]GateFile{}
	if cp.State.Has("gates") {
		if err := cp.State.Get("gates", &gates); err != nil {
			return pf, nil, fmt.Errorf("thread %q checkpoint %d: gates: %w", cp.Thread, cp.Seq, err)
		}
	}
	if cp.Status == store.StatusFailed {
		var agents map[string]string
		if cp.State.Has("agents") {
			_ = cp.State.Get("agents", &agents) // names are cosmetic
		}
		for _, node := range cp.Nodes {
			n, ok := gateOfNode(node)
			if !ok {
				continue
			}
			key := strconv.Itoa(n)
			gates[key] = GateFile{Gate: n, Agent: agents[key], Status: GateFailed, Metadata: gateMetadata(pf.Metadata),
				Output: json.RawMessage("null"), Validation: Validation{Issues: []string{cp.Meta.Error}}}
			pf.Status, pf.CurrentGate = GateFailed, n
		}
	}
	out := make([]GateFile, 0, len(gates))
	for _, g := range gates {
		if g.Validation.Issues == nil {
			g.Validation.Issues = []string{}
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b GateFile) int { return a.Gate - b.Gate })
	return pf, out, nil
}

// writeFiles writes the files into dir, and removes gate files of gates
// the state does not have (a fork from before them).
func writeFiles(dir string, pf File, gates []GateFile) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	keep := map[string]bool{}
	for _, g := range gates {
		path := gateFilePath(dir, pf.Metadata, g.Gate)
		if err := writeJSON(path, g); err != nil {
			return paths, err
		}
		keep[filepath.Base(path)] = true
		paths = append(paths, path)
	}
	path := pipelineFilePath(dir, pf.Metadata)
	if err := writeJSON(path, pf); err != nil {
		return paths, err
	}
	paths = append(paths, path)
	stale, _ := filepath.Glob(filepath.Join(dir, filePrefix(pf.Metadata)+"-gate*-output.json"))
	for _, s := range stale {
		if !keep[filepath.Base(s)] {
			if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
				return paths, err
			}
		}
	}
	return paths, nil
}

// writeJSON writes v as indented JSON, as people read it (no HTML
// escaping, in stored outputs neither), atomically: a temporary file with
// a unique name in the same folder, synced, then renamed over path.
func writeJSON(path string, v any) error {
	data, err := jsontext.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// removeTemps removes the temporary files a writer killed before its
// rename left in dir. Only a holder of the folder's lock may call it: no
// other writer's temporary file is then in flight.
func removeTemps(dir string) error {
	temps, err := filepath.Glob(filepath.Join(dir, ".*.json.*.tmp"))
	if err != nil {
		return err
	}
	for _, t := range temps {
		if err := os.Remove(t); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// fileWriter keeps a thread's files equal to its committed head.
type fileWriter struct {
	p      *Pipeline
	s      store.Store
	thread string
	onGate func(GateReport)
	// stop stops the run at the first failed write: no gate runs while
	// the files lag behind the store.
	stop context.CancelCauseFunc

	mu    sync.Mutex
	start time.Time // of the step running now
	err   error     // the first write error
}

// ErrFiles: a pipeline's gate or pipeline files could not be written
// after a commit. The run stops there; the store holds every committed
// gate, and a resume writes the files before it runs the next gate.
var ErrFiles = errors.New("pipeline: gate files not written")

// firstErr is the first write error of the run, if any.
func (w *fileWriter) firstErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// observe writes the files after every commit of the pipeline's runner:
// the first checkpoint, each gate's step, a failed gate's checkpoint.
func (w *fileWriter) observe(ctx context.Context, e flow.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch e.Kind {
	case flow.EventStepStart:
		w.start = e.Time
		return
	case flow.EventRunStart, flow.EventStepEnd, flow.EventError:
	default:
		return
	}
	if _, err := w.sync(ctx); err != nil {
		if w.err == nil {
			w.err = fmt.Errorf("%w after checkpoint %d: %w", ErrFiles, e.Seq, err)
			if w.stop != nil {
				w.stop(w.err)
			}
		}
		return
	}
	if e.Kind != flow.EventRunStart && w.onGate != nil {
		w.report(ctx, e)
	}
}

// report tells onGate about the gate a step committed.
func (w *fileWriter) report(ctx context.Context, e flow.Event) {
	cp, err := w.s.Load(ctx, store.LoadRequest{Thread: w.thread, Seq: e.Seq})
	if err != nil || (e.Kind == flow.EventError) != (cp.Status == store.StatusFailed) {
		return // the failed step was not committed
	}
	_, gates, err := filesOf(cp)
	if err != nil {
		return
	}
	var d time.Duration
	if !w.start.IsZero() {
		d = e.Time.Sub(w.start)
	}
	for _, node := range cp.Nodes {
		n, ok := gateOfNode(node)
		if !ok {
			continue
		}
		for _, g := range gates {
			if g.Gate == n {
				w.onGate(GateReport{File: g, Seq: cp.Seq, Duration: d})
			}
		}
	}
}

// sync writes the files of the thread's head and returns their paths. It
// holds a lock on the thread's folder, so concurrent writers (two
// processes on one thread) take turns and the last one writes the newest
// head: the files never contradict the store once both are done.
func (w *fileWriter) sync(ctx context.Context) ([]string, error) {
	dir := w.p.StateDirOf(w.thread)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := removeTemps(dir); err != nil {
		return nil, err
	}
	head, err := w.s.Load(ctx, store.LoadRequest{Thread: w.thread})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // nothing committed yet
	}
	if err != nil {
		return nil, err
	}
	pf, gates, err := filesOf(head)
	if err != nil {
		return nil, err
	}
	return writeFiles(dir, pf, gates)
}

// finish writes the files once more when the run has ended — they always
// end as the store says, whoever committed last — and returns the run's
// error: runErr, or the first failed write, which stopped the run (cause
// is why the run's context ended).
func (w *fileWriter) finish(ctx context.Context, runErr, cause error) error {
	first := w.firstErr()
	if first != nil && errors.Is(cause, first) && errors.Is(runErr, context.Canceled) {
		runErr = nil // the runner stopped because the write failed
	}
	if _, err := w.sync(ctx); err != nil && first == nil {
		first = fmt.Errorf("%w: %w", ErrFiles, err)
	}
	return errors.Join(runErr, first)
}

// WriteFiles brings a thread's gate and pipeline files (in StateDirOf)
// up to date with its head in the store, as a run writes them after each
// commit, and returns their paths: after a write that failed (a full
// disk) or a process killed between a commit and its files, a finished
// pipeline's files say what the store says again.
func (p *Pipeline) WriteFiles(ctx context.Context, s store.Store, thread string) ([]string, error) {
	w := &fileWriter{p: p, s: s, thread: thread}
	paths, err := w.sync(ctx)
	if err != nil {
		return paths, fmt.Errorf("%w: %w", ErrFiles, err)
	}
	return paths, nil
}

// ExportGateFiles writes a pipeline thread's gate and pipeline files into
// dir from the store alone (the .state layout of its head, the final
// status included), and returns their paths.
func ExportGateFiles(ctx context.Context, s store.Store, thread, dir string) ([]string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	cp, err := s.Load(ctx, store.LoadRequest{Thread: thread})
	if err != nil {
		return nil, err
	}
	pf, gates, err := filesOf(cp)
	if err != nil {
		return nil, err
	}
	return writeFiles(abs, pf, gates)
}
