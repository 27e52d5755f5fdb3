package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/store"
)

// The journal: what a task did inside its step that must not be done
// again when the step runs again after a crash — a model call that was
// answered, a tool call that completed. A step commits whole or not at
// all, so without it a step cut short by a crash starts over and repeats
// every call it had made. Record writes an entry as a pending write (of
// the checkpoint the step reads) the moment it is called, in its own
// small transaction; Recorded, in the step's next attempt, finds it.
//
// Entries belong to one attempt chain: their key names the head the step
// started from, so a step that failed (a FAILED checkpoint is a new head)
// or was interrupted runs afresh when resumed, while one cut short by a
// crash (the head did not move) finds what it recorded. Entries are
// redacted with the runner's redactor before they are stored. The journal
// is kept only under DurabilitySync: with async or exit durability the
// checkpoint a step reads may not be stored yet, and a crash could hand
// its entries to another state.

const journalPrefix = "journal/"

// journalKey is the pending-write task of the entry name of the running
// task: the journal prefix, the head the step started from, the task's
// idempotency key and the name.
func (t *task) journalKey(name string) string {
	return journalPrefix + strconv.FormatInt(t.head, 10) + "/" + t.info.Key + "/" + name
}

// journaled reports whether the running task keeps a journal.
func (t *task) journaled() bool {
	if t == nil || t.runner == nil || t.runner.s == nil {
		return false
	}
	d := t.runner.opts.Durability
	return d == "" || d == DurabilitySync
}

// Record stores value (encoded as JSON, then redacted) in the running
// task's journal under name, durably, and returns the bytes it stored. A
// later attempt of the same step after a crash reads them with Recorded.
// Outside a node, or when the runner does not keep a journal (durability
// async or exit), it stores nothing and returns nil, nil.
func Record(ctx context.Context, name string, value any) (_ json.RawMessage, err error) {
	t := taskOf(ctx)
	if !t.journaled() {
		return nil, nil
	}
	if name == "" {
		return nil, fmt.Errorf("%w: a journal entry needs a name", store.ErrInvalidArgument)
	}
	b, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("flow: journal entry %q: %w", name, err)
	}
	b = t.runner.opts.Redact.JSON(b)
	r := t.runner
	w := store.Write{Task: t.journalKey(name), Node: t.info.Node, Update: b}
	ws := []store.Write{w}
	if t.stepCalls != nil {
		calls, _ := t.stepCalls.take() // the call records so far go with it
		ws = append(ws, calls...)
		defer func() {
			if len(calls) > 0 && err != nil {
				t.stepCalls.putBack(calls)
			}
		}()
	}
	if err = r.s.PutWrites(ctx, t.info.Thread, r.opts.Namespace, t.info.ReadSeq, ws); err != nil {
		return nil, fmt.Errorf("flow: journal entry %q: %w", name, err)
	}
	t.mu.Lock()
	if t.journal != nil {
		t.journal[w.Task] = b
	}
	t.mu.Unlock()
	return b, nil
}

// Recorded returns what an earlier attempt of the running step stored
// under name with Record, if that attempt was cut short by a crash (see
// the journal's rules above). ok is false when there is no such entry,
// outside a node, and when the runner keeps no journal.
func Recorded(ctx context.Context, name string) (raw json.RawMessage, ok bool, err error) {
	t := taskOf(ctx)
	if !t.journaled() {
		return nil, false, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.journal == nil {
		if err := t.loadJournal(ctx); err != nil {
			return nil, false, err
		}
	}
	raw, ok = t.journal[t.journalKey(name)]
	return raw, ok, nil
}

// loadJournal reads the task's entries once (t.mu held).
func (t *task) loadJournal(ctx context.Context) error {
	r := t.runner
	ws, err := r.s.Writes(ctx, t.info.Thread, r.opts.Namespace, t.info.ReadSeq)
	if err != nil {
		return fmt.Errorf("flow: journal: %w", err)
	}
	prefix := t.journalKey("")
	t.journal = map[string]json.RawMessage{}
	for _, w := range ws {
		if strings.HasPrefix(w.Task, prefix) {
			t.journal[w.Task] = w.Update
		}
	}
	return nil
}

// isJournal reports whether a pending write is a journal entry rather
// than a task's update.
func isJournal(task string) bool { return strings.HasPrefix(task, journalPrefix) }
