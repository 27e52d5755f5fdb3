package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// EventSteer tells that a step took messages from the thread's inbox:
// Payload is {"entries": [their numbers], "<field>": [the messages as
// the state holds them]}, Seq the checkpoint the step read.
const EventSteer EventKind = "steer"

// ErrNoSteering is the error of a graph that cannot take steering: its
// state has no field for it (Options.SteerField, or a field of the
// messages reducer).
var ErrNoSteering = errors.New("flow: this graph takes no steering")

// Inbox is where a runner finds the messages sent to a thread while its
// run runs (store.Inbox is one).
type Inbox interface {
	// Last returns the number of the thread's last entry (0: none).
	Last(ctx context.Context, thread string) (int64, error)
	// Entries returns the thread's entries numbered after after, in
	// order.
	Entries(ctx context.Context, thread string, after int64) ([]store.InboxEntry, error)
}

// SteerField returns the state field steering messages go into: field
// when not empty (it must be a field of the schema), else the schema's
// one field whose reducer is messages (add_messages). ErrNoSteering when
// there is none, or several to choose from.
func SteerField(s *state.Schema, field string) (string, error) {
	if field != "" {
		if !slices.Contains(s.Fields(), field) {
			return "", fmt.Errorf("%w: the steering field %q is not a field of the state", ErrNoSteering, field)
		}
		return field, nil
	}
	var found []string
	for _, f := range s.Fields() {
		if s.Reducer(f) == state.ReducerMessages {
			found = append(found, f)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("%w: its state has no messages field", ErrNoSteering)
	}
	return "", fmt.Errorf("%w: its state has several messages fields %q; name one (Options.SteerField)", ErrNoSteering, found)
}

// steered is what a step took from the inbox: the state its tasks read
// (the messages applied), the patch that applied them and the highest
// entry taken (0: none).
type steered struct {
	doc   state.Doc
	patch state.Patch
	upTo  int64
}

// takeSteers reads the thread's pending steer entries (those after the
// head's Usage.Inbox) before a step of the root namespace and applies
// them to the state the step's tasks read, through the steering field's
// reducer. They are consumed when the step commits: its checkpoint's
// Usage.Inbox records the highest one. A step that fails or is cut short
// commits no such record, so the entries stay pending and the step's
// rerun takes them again (with any accepted since). Follow-ups wait for
// the run's end: the first step of a run takes them, a run started
// (Invoke) all, a resumed one those made its run (InboxEntry.Run), so
// that a run resumed after a crash leaves those sent while it ran for
// the run made of them (a steer after a follow-up waits with it, so that
// messages keep their order).
func (r *Runner) takeSteers(ctx context.Context, run *run, readSeq int64) (steered, error) {
	out := steered{doc: run.doc}
	if r.opts.Inbox == nil || r.opts.Namespace != "" || !r.steersBefore(run.tasks) {
		return out, nil
	}
	if last, err := r.opts.Inbox.Last(ctx, run.thread); err != nil || last <= run.usage.Inbox {
		return out, err // the common case: one key read, nothing pending
	}
	ens, err := r.opts.Inbox.Entries(ctx, run.thread, run.usage.Inbox)
	if err != nil || len(ens) == 0 {
		return out, err
	}
	field, err := SteerField(r.g.schema, r.opts.SteerField)
	if err != nil {
		return out, err
	}
	var msgs []json.RawMessage
	var seqs []int64
	first := run.usage.Steps == run.base.Steps // a run's first step takes follow-ups too
	for _, en := range ens {
		if en.Kind != store.InboxSteer && !(first && (run.fresh && en.Run == "" || en.Run == run.id)) {
			break
		}
		msgs, seqs = append(msgs, steerMessage(en.Message)), append(seqs, en.Seq)
	}
	if len(msgs) == 0 {
		return out, nil
	}
	upd, err := json.Marshal(msgs)
	if err != nil {
		return out, err
	}
	key := fmt.Sprintf("%s/inbox/%d", run.thread, seqs[0])
	doc, patch, err := r.g.schema.ApplyJSON(run.doc, map[string]json.RawMessage{field: upd}, state.ApplyOptions{NewID: idGen(key)})
	if err != nil {
		return out, fmt.Errorf("flow: steering field %q: %w", field, err)
	}
	out = steered{doc: doc, patch: patch, upTo: seqs[len(seqs)-1]}
	if r.opts.Observer != nil {
		n, _ := doc.ListLen(field)
		added := make([]json.RawMessage, 0, len(msgs))
		for i := max(0, n-len(msgs)); i < n; i++ {
			if m, ok := doc.Element(field, i); ok {
				added = append(added, m)
			}
		}
		payload, _ := json.Marshal(map[string]any{"entries": seqs, field: added})
		r.emit(Event{Kind: EventSteer, RunID: run.id, Thread: run.thread, Seq: readSeq, Payload: payload})
	}
	return out, nil
}

// steersBefore reports whether a step running tasks may take steering
// before they run (Options.SteerBefore, Options.SteerInside).
func (r *Runner) steersBefore(tasks []store.Task) bool {
	if len(tasks) == 0 || slices.ContainsFunc(tasks, func(t store.Task) bool { return slices.Contains(r.opts.SteerInside, t.Node) }) {
		return false
	}
	if len(r.opts.SteerBefore) == 0 {
		return true
	}
	for _, t := range tasks {
		if slices.Contains(r.opts.SteerBefore, t.Node) {
			return true
		}
	}
	return false
}

// steerMessage is an entry's message as the reducer takes it: a string is
// a human message with that content.
func steerMessage(m json.RawMessage) json.RawMessage {
	var text string
	if len(m) == 0 || m[0] != '"' || json.Unmarshal(m, &text) != nil {
		return m
	}
	b, _ := json.Marshal(map[string]string{"type": "human", "content": text})
	return b
}

// stepInbox is what a step's tasks take from the thread's inbox while
// they run (TakeSteers): entries after upTo are still pending. Shared by
// the step's tasks, so two never take one entry.
type stepInbox struct {
	r      *Runner
	run    *run
	thread string
	seq    int64 // the checkpoint the step read
	mu     sync.Mutex
	from   int64 // the cursor when the step's tasks began
	upTo   int64
}

// newStepInbox is the step's share of the inbox, nil when the run reads
// none (a subgraph's steps, a runner without Options.Inbox).
func (r *Runner) newStepInbox(run *run, plan *stepPlan) *stepInbox {
	if r.opts.Inbox == nil || r.opts.Namespace != "" {
		return nil
	}
	from := max(run.usage.Inbox, plan.steer.upTo)
	return &stepInbox{r: r, run: run, thread: run.thread, seq: plan.readSeq, from: from, upTo: from}
}

// taken is the highest entry the step's tasks took (0: none beyond the
// step's start).
func (si *stepInbox) taken() int64 {
	si.mu.Lock()
	defer si.mu.Unlock()
	if si.upTo == si.from {
		return 0
	}
	return si.upTo
}

// TakeSteers returns, inside a node of a run that reads its thread's
// inbox (Options.Inbox, root namespace), the steer messages sent to the
// thread since the step began or since the node's last call, in the
// shape the state's messages hold (a string is a human message), with
// the highest entry taken. They are consumed by the step: its checkpoint
// records upTo, and a step that does not commit leaves them pending. A
// loop that makes several model calls in one node calls it before each
// (agent.RunTools does, recording what it took in the step's journal so
// that a rerun takes the same entries at the same call: SteersTaken).
// Outside such a node it returns nothing.
func TakeSteers(ctx context.Context) ([]json.RawMessage, int64, error) {
	t := taskOf(ctx)
	if t == nil || t.inbox == nil {
		return nil, 0, nil
	}
	si := t.inbox
	si.mu.Lock()
	defer si.mu.Unlock()
	if last, err := si.r.opts.Inbox.Last(ctx, si.thread); err != nil || last <= si.upTo {
		return nil, 0, err
	}
	ens, err := si.r.opts.Inbox.Entries(ctx, si.thread, si.upTo)
	if err != nil {
		return nil, 0, err
	}
	var msgs []json.RawMessage
	var seqs []int64
	for _, en := range ens {
		if en.Kind != store.InboxSteer {
			break
		}
		msgs, seqs = append(msgs, steerMessage(en.Message)), append(seqs, en.Seq)
	}
	if len(msgs) == 0 {
		return nil, 0, nil
	}
	si.upTo = seqs[len(seqs)-1]
	if si.r.opts.Observer != nil {
		payload, _ := json.Marshal(map[string]any{"entries": seqs, "messages": msgs, "node": t.info.Node})
		si.r.emit(Event{Kind: EventSteer, RunID: si.run.id, Thread: si.thread, Seq: si.seq, Node: t.info.Node, Key: t.info.Key, Payload: payload})
	}
	return msgs, si.upTo, nil
}

// SteersTaken marks the inbox entries up to upTo consumed by the running
// step, as TakeSteers does: for a node that replays, from its journal, a
// call an earlier attempt of the step made with them.
func SteersTaken(ctx context.Context, upTo int64) {
	t := taskOf(ctx)
	if t == nil || t.inbox == nil {
		return
	}
	t.inbox.mu.Lock()
	t.inbox.upTo = max(t.inbox.upTo, upTo)
	t.inbox.mu.Unlock()
}
