package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/cairn-dev/cairn/store"
)

// The call record: every call a task makes to the outside world — a
// model call, a tool call, the answer an interrupt was resumed with — is
// numbered in the order the task makes it (BeginCall) and stored in the
// step's journal under "call/<n>" (RecordCall), redacted like every
// journal entry. Unlike the tool loop's crash entries these are read by
// nobody during a run: they stay with the checkpoint the step read (a
// pending write, so a prune that drops the checkpoint drops them) for a
// replay to answer the same calls from (package replay). Like the
// journal, they are kept only under DurabilitySync.
//
// A Tape in the run's context (WithTape) turns the calls around: package
// agent asks it for each call's answer instead of calling the model or
// the tool.

// CallSteer is the Kind of a Call that asks a tape for the inbox
// messages a loop took (see Call.Kind).
const CallSteer = "steer"

// CallRecordPrefix starts the name of a call record in a task's journal:
// "call/<n>", n the call's position in the task from 0.
const CallRecordPrefix = "call/"

// Tape answers a task's outside calls from a recording instead of making
// them.
type Tape interface {
	// Answer returns the recorded answer of call c, or an error (the
	// call then fails as the real call would have).
	Answer(ctx context.Context, c Call) (json.RawMessage, error)
}

// Call is one outside call of a running task, as a Tape sees it.
type Call struct {
	// Task is the calling task.
	Task RunInfo
	// Index is the call's position among the task's calls, from 0.
	Index int
	// Kind is "model", "tool" or CallSteer. A CallSteer call asks what a
	// loop took from the thread's inbox before its model call Index (the
	// recorded journal entry Name, "steer/<Index>"; nil: nothing): it is
	// not numbered among the task's calls.
	Kind string
	// Name names the call within its task ("model/0", "tool/0.1", …).
	Name string
	// Request is the call's record as it would be stored (redacted):
	// what the replay compares with the recorded one.
	Request json.RawMessage
}

type tapeCtxKey struct{}

// WithTape returns a context whose runs answer their tasks' outside calls
// from tp (package agent asks it). Nested runs inherit it.
func WithTape(ctx context.Context, tp Tape) context.Context {
	return context.WithValue(ctx, tapeCtxKey{}, tp)
}

// TapeOf returns the Tape of ctx, or nil.
func TapeOf(ctx context.Context) Tape {
	tp, _ := ctx.Value(tapeCtxKey{}).(Tape)
	return tp
}

// BeginCall reserves the position of the running task's next outside
// call and returns it (from 0 in each attempt of the task); -1 outside a
// node.
func BeginCall(ctx context.Context) int {
	t := taskOf(ctx)
	if t == nil {
		return -1
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.calls
	t.calls++
	return n
}

// RecordCall stores entry as call index of the running task (see
// BeginCall), as Record does — redacted, and only where the runner keeps
// a journal — but not at once: the record is written with the step's
// checkpoint, in its commit's transaction, or with the task's next
// journal entry (Record), whichever comes first. So a call costs no
// transaction of its own, and a call whose outcome the journal keeps
// (a tool loop's) has its record kept with it. A step cut short by a
// crash loses the records of the calls it made since its last journal
// entry, and makes them again. It does nothing for a negative index.
func RecordCall(ctx context.Context, index int, entry any) error {
	if index < 0 {
		return nil
	}
	t := taskOf(ctx)
	if !t.journaled() {
		return nil
	}
	if t.stepCalls == nil {
		_, err := Record(ctx, CallRecordPrefix+strconv.Itoa(index), entry)
		return err
	}
	b, err := json.Marshal(entry)
	if err != nil {
		return fmt.Errorf("flow: call record %d: %w", index, err)
	}
	t.stepCalls.add(store.Write{Task: t.journalKey(CallRecordPrefix + strconv.Itoa(index)), Node: t.info.Node, Update: t.runner.opts.Redact.JSON(b)})
	return nil
}

// stepCalls keeps the call records a step's tasks made (RecordCall) until
// the step's commit or a task's next journal entry writes them.
type stepCalls struct {
	seq int64 // the checkpoint the step read, whose writes they are
	mu  sync.Mutex
	ws  []store.Write
}

// stepCalls readies a run's call records for its step reading seq: sc
// (the run's, made at its first step) emptied of what a step that did
// not commit left; nil when the runner keeps no journal.
func (r *Runner) stepCalls(sc *stepCalls, seq int64) *stepCalls {
	if r.s == nil || (r.opts.Durability != "" && r.opts.Durability != DurabilitySync) {
		return nil
	}
	if sc == nil {
		return &stepCalls{seq: seq}
	}
	sc.mu.Lock()
	sc.seq, sc.ws = seq, nil
	sc.mu.Unlock()
	return sc
}

func (sc *stepCalls) add(w store.Write) {
	sc.mu.Lock()
	sc.ws = append(sc.ws, w)
	sc.mu.Unlock()
}

// take returns the records kept so far, and the checkpoint they belong to,
// and forgets them.
func (sc *stepCalls) take() ([]store.Write, int64) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	ws := sc.ws
	sc.ws = nil
	return ws, sc.seq
}

// putBack returns records a failed write took.
func (sc *stepCalls) putBack(ws []store.Write) {
	sc.mu.Lock()
	sc.ws = append(ws, sc.ws...)
	sc.mu.Unlock()
}

// TaskValue returns the running task's value under key, made by mk on
// first use; callers keep per-task state in it (package agent: the last
// request it recorded, to record the next as what changed). Nil outside
// a node.
func TaskValue(ctx context.Context, key string, mk func() any) any {
	t := taskOf(ctx)
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.values[key]; ok {
		return v
	}
	if t.values == nil {
		t.values = map[string]any{}
	}
	v := mk()
	t.values[key] = v
	return v
}

// recordAnswer records the value an interrupt was resumed with as the
// task's next call, so a replay can give the same answer.
func recordAnswer(ctx context.Context, answer json.RawMessage) error {
	return RecordCall(ctx, BeginCall(ctx), struct {
		Kind   string          `json:"kind"`
		Answer json.RawMessage `json:"answer"`
	}{"interrupt", answer})
}
