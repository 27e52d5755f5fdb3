package tracefile

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/jsontext"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Live writes a thread's trace while its run proceeds: each checkpoint of
// the root namespace adds its line to events.jsonl and steps.jsonl as it
// commits, and manifest.json is rewritten (status "running" until the run
// ends). What it leaves is byte for byte what Export writes afterwards.
// Hand Observer to the runner (it needs checkpoint events: stream the run
// in flow.StreamCheckpoints mode) and Close when the run returns.
type Live struct {
	s      store.Store
	thread string
	dir    string

	mu     sync.Mutex
	states map[int64]state.Doc
	runID  string
	task   *taskRecord
	first  store.Checkpoint
	head   store.Checkpoint
	n      int
	events *os.File
	steps  *os.File
	err    error // the first failure, returned by Close
}

// NewLive starts a live trace of thread in dir (created if needed), with
// what the thread already holds.
func NewLive(ctx context.Context, s store.Store, thread, dir string) (*Live, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l := &Live{s: s, thread: thread, dir: dir, states: map[int64]state.Doc{}}
	var err error
	if l.events, err = os.Create(filepath.Join(dir, "events.jsonl")); err != nil {
		return nil, err
	}
	if l.steps, err = os.Create(filepath.Join(dir, "steps.jsonl")); err != nil {
		l.events.Close()
		return nil, err
	}
	if err := l.catchUp(ctx, -1); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// Observer returns the flow observer that follows the run's commits.
func (l *Live) Observer(ctx context.Context) func(flow.Event) {
	return func(ev flow.Event) {
		if ev.Kind != flow.EventCheckpoint || ev.Namespace != "" {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err == nil {
			l.err = l.catchUp(ctx, ev.Seq)
		}
	}
}

// Close writes what the run committed last and the final manifest.
func (l *Live) Close(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = l.catchUp(ctx, -1)
	}
	return errors.Join(l.err, l.close())
}

func (l *Live) close() error {
	return errors.Join(l.events.Close(), l.steps.Close())
}

// catchUp writes the checkpoints after the last one written, up to seq
// (-1: the head), then the manifest. A checkpoint not committed yet (an
// async commit) is left for the next call.
func (l *Live) catchUp(ctx context.Context, upTo int64) error {
	if upTo < 0 {
		head, err := l.s.Load(ctx, store.LoadRequest{Thread: l.thread})
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		upTo = head.Seq
	}
	for seq := l.head.Seq + 1; seq <= upTo; seq++ {
		cp, err := l.s.Load(ctx, store.LoadRequest{Thread: l.thread, Seq: seq})
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return err
		}
		if err := l.add(cp); err != nil {
			return err
		}
	}
	if l.n == 0 {
		return nil
	}
	return writeJSON(filepath.Join(l.dir, "manifest.json"), manifestOf(l.thread, l.runID, l.task, l.first, l.head, l.n))
}

// add writes one checkpoint's event and step lines.
func (l *Live) add(cp store.Checkpoint) error {
	l.states[cp.Seq] = cp.State
	if cp.Meta.RunID != "" {
		l.runID = cp.Meta.RunID
	}
	st, err := stepOf(cp, l.states[cp.Parent])
	if err != nil {
		return fmt.Errorf("trace: step record of %s/%d: %w", l.thread, cp.Seq, err)
	}
	task, err := taskOf(cp)
	if err != nil {
		return fmt.Errorf("trace: task record of %s/%d: %w", l.thread, cp.Seq, err)
	}
	if task != nil {
		l.task = task
	}
	if err := appendLine(l.events, eventOf(cp, l.runID)); err != nil {
		return err
	}
	if err := appendLine(l.steps, st); err != nil {
		return err
	}
	if l.n == 0 {
		l.first = cp
	}
	l.head = cp
	l.n++
	return nil
}

// appendLine writes v as one JSON line, as writeLines does.
func appendLine(f *os.File, v any) error {
	w := bufio.NewWriter(f)
	if err := jsontext.NewEncoder(w).Encode(v); err != nil {
		return err
	}
	return w.Flush()
}
