package flow

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// runStartKey is the store.Meta.Extra member holding the usage at the
// start of the run that wrote the checkpoint. It is written on a run's
// first checkpoint of every attempt, on checkpoints where a run stopped
// short and every runStartEvery steps, so a resume after a crash finds it
// in a few rows.
const runStartKey = "run_usage"

const runStartEvery = 256

// usageOf reads a checkpoint's cumulative usage (zero when not recorded).
func usageOf(m store.Meta) store.Usage {
	if m.Usage == nil {
		return store.Usage{}
	}
	return *m.Usage
}

// setRunStart records where the run's usage started.
func setRunStart(m *store.Meta, base store.Usage) {
	if m.Extra == nil {
		m.Extra = map[string]any{}
	}
	m.Extra[runStartKey] = base
}

// runStartOf reads the run start recorded in a checkpoint's metadata.
func runStartOf(m store.Meta) (store.Usage, bool) {
	v, ok := m.Extra[runStartKey]
	if !ok {
		return store.Usage{}, false
	}
	if u, ok := v.(store.Usage); ok {
		return u, true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return store.Usage{}, false
	}
	var u store.Usage
	if json.Unmarshal(b, &u) != nil {
		return store.Usage{}, false
	}
	return u, true
}

// runStart finds the usage at the start of the run a resume continues:
// it follows head's ancestors to the nearest checkpoint that records it.
// A fork or an input checkpoint without the record starts a run at its
// own usage, as does the first checkpoint of the thread; an interrupt
// ends a run, so the run after one starts at its usage.
func (r *Runner) runStart(ctx context.Context, head store.Checkpoint) (store.Usage, error) {
	if u, ok := runStartOf(head.Meta); ok {
		return u, nil
	}
	if head.Meta.Source == "fork" || head.Meta.Source == "input" || head.Parent == 0 {
		return usageOf(head.Meta), nil
	}
	want := head.Parent
	for cp, err := range r.s.History(ctx, store.HistoryRequest{Thread: head.Thread, Namespace: head.Namespace, Before: head.Seq}) {
		if err != nil {
			return store.Usage{}, err
		}
		if cp.Seq != want {
			continue // another branch
		}
		if cp.Status == store.StatusInterrupted || cp.Meta.StopReason == string(state.StopInterrupt) {
			return usageOf(cp.Meta), nil // the run after an interrupt is a new one
		}
		if u, ok := runStartOf(cp.Meta); ok {
			return u, nil
		}
		if cp.Meta.Source == "fork" || cp.Meta.Source == "input" || cp.Parent == 0 {
			return usageOf(cp.Meta), nil
		}
		want = cp.Parent
	}
	return store.Usage{}, nil
}

// startUsage sets the usage at the head and at the run's start.
func (run *run) startUsage(head, base store.Usage) {
	run.usage, run.base = head, base
	run.attemptMS = head.RuntimeMS
}

// currentUsage is the usage at this moment: the head's, with the runtime
// of this attempt so far.
func (run *run) currentUsage() store.Usage {
	u := run.usage
	u.RuntimeMS = run.attemptMS + run.r.opts.Now().Sub(run.attemptStart).Milliseconds()
	return u
}

// progress is what the run has used since it started (across resumes).
func (run *run) progress() Progress {
	return Progress{
		Steps:     int(run.usage.Steps - run.base.Steps),
		Tokens:    store.Tokens{Input: run.usage.Tokens.Input - run.base.Tokens.Input, Output: run.usage.Tokens.Output - run.base.Tokens.Output},
		Start:     run.start,
		Scheduled: len(run.tasks),
	}
}

// Crash attempts. A step cut short by a crash commits nothing, so a node
// that kills its process every time would run again on every resume
// without counting. Each Resume therefore records an attempt marker (a
// pending write "attempt/<head>/<run id>" at the seq its first step reads)
// before that step runs, and counts the markers an earlier Resume of the
// same head left: each is a step that ran and never committed. One small
// write per Resume, none per step.

const attemptPrefix = "attempt/"

func isAttempt(task string) bool { return strings.HasPrefix(task, attemptPrefix) }

// countCrashes adds the crashed attempts recorded for head to the usage
// and prepares this attempt's marker.
func (run *run) countCrashes(head int64, ws []store.Write) {
	prefix := attemptPrefix + strconv.FormatInt(head, 10) + "/"
	for _, w := range ws {
		if strings.HasPrefix(w.Task, prefix) {
			run.usage.Steps++
		}
	}
	run.attemptKey = prefix + run.id
}

// markAttempt writes this Resume's marker before its first step.
func (run *run) markAttempt(ctx context.Context) error {
	if run.attemptKey == "" || len(run.tasks) == 0 {
		return nil
	}
	w := store.Write{Task: run.attemptKey, Node: run.tasks[0].Node, Update: json.RawMessage("{}")}
	run.attemptKey = ""
	return run.r.s.PutWrites(ctx, run.thread, run.r.opts.Namespace, run.readSeqOrHead(), []store.Write{w})
}

// MarkRunStart makes what runs from a checkpoint of metadata m — one
// written outside the runner, as a service's record of a run it stopped
// — a new run, whose budgets and recursion limit count from m's usage.
func MarkRunStart(m *store.Meta) { setRunStart(m, usageOf(*m)) }
