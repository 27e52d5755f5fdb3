package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Event is one event of a run's stream: its seq in the run's log, the
// attempt of the run that sent it, its SSE event name ("values",
// "updates|gate1", …) and its JSON data.
//
// An event whose content is a committed checkpoint's (a values event is
// a whole state) carries a reference (ref) instead of data: the log stores
// the reference, and the data is built when a reader first needs it —
// from the state in hand while the run goes on, from the checkpoint when
// the log is read back — the same bytes either way.
type Event struct {
	Seq     int64
	Attempt int
	Event   string
	data    json.RawMessage
	ref     *eventRef
}

// eventRef is what an event is built from.
type eventRef struct {
	kind string // refValues, refFinal, refCheckpoints or refDebug
	ns   string
	seq  int64
	// stored: the checkpoint is committed, so the log may keep the
	// reference; otherwise it keeps the built data.
	stored bool
	// ts is a debug event's timestamp.
	ts string
	// doc is the state itself while the run that sent it goes on.
	doc *state.Doc
	// redact: the run's assistant does not redact what it commits, so the
	// server redacts what is built from its state.
	redact bool
	// extra is a task event's own fields (id, name, triggers), which
	// the log keeps beside the reference; its input is the state.
	extra json.RawMessage

	once  sync.Once
	built json.RawMessage
	err   error
}

// The kinds of events built from a checkpoint.
const (
	refValues      = "values"      // the state, redacted
	refFinal       = "final"       // the state with its pending interrupt (logs written before values at a pause became __interrupt__ alone)
	refCheckpoints = "checkpoints" // the checkpoint as a thread state
	refDebug       = "debug"       // a debug event of type checkpoint
	refInput       = "input"       // the input view before a run's input checkpoint (InputView)
	refDebugInput  = "debug_input" // a debug event of that input view
	refTask        = "task"        // a task's start, its input the state it read
	refDebugTask   = "debug_task"  // a debug event of type task
	// refRun is a run's metadata event, rebuilt from the run itself.
	refRun = "run"
)

// Inline returns an event that carries its data.
func Inline(event string, data json.RawMessage) *Event {
	return &Event{Event: event, data: data}
}

// storedEvent is an event as a run log keeps it: its name, and its data
// or the kind of checkpoint event it is rebuilt as.
type storedEvent struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data,omitempty"`
	Ref   string          `json:"ref,omitempty"`
	TS    string          `json:"ts,omitempty"`
}

// eventLog is the log of a run in progress: every event it streamed, in
// memory for the clients that follow it live, and written to the store
// in small batches so that a client that reconnects later, or to another
// server, reads the same events with the same ids.
type eventLog struct {
	run     string
	thread  string
	attempt int
	rl      store.RunLog
	log     *slog.Logger
	// build gives an event built from a checkpoint its data (for a
	// reference the store cannot keep).
	build func(*Event) (json.RawMessage, error)

	mu        sync.Mutex
	evs       []*Event
	persisted int
	failures  int // consecutive failed writes (persist's own)
	closing   bool
	done      bool
	wake      chan struct{}
	kick      chan struct{}
	closeNow  chan struct{} // closed by close: store what is left at once
	stopped   chan struct{}
}

// persistDelay batches the events of a busy run into one write.
const persistDelay = 20 * time.Millisecond

// newEventLog starts the log of a run's attempt whose earlier events (from
// a previous server or attempt) are prior.
func newEventLog(run, thread string, attempt int, rl store.RunLog, log *slog.Logger, build func(*Event) (json.RawMessage, error), prior []*Event) *eventLog {
	l := &eventLog{run: run, thread: thread, attempt: attempt, rl: rl, log: log, build: build, evs: prior, persisted: len(prior), wake: make(chan struct{}), kick: make(chan struct{}, 1), closeNow: make(chan struct{}), stopped: make(chan struct{})}
	go l.persist()
	return l
}

// append adds an event and wakes its readers.
func (l *eventLog) append(ev *Event) {
	l.mu.Lock()
	ev.Seq, ev.Attempt = int64(len(l.evs)+1), l.attempt
	l.evs = append(l.evs, ev)
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// since returns the events after seq after, whether the log is complete,
// and a channel closed when more arrive.
func (l *eventLog) since(after int64) ([]*Event, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if after < 0 {
		after = 0
	}
	var out []*Event
	if int(after) < len(l.evs) {
		out = l.evs[after:]
	}
	return out, l.done, l.wake
}

// resume is where a reader holding event (seq, attempt) goes on in this
// log (see resumeAfter); a reader ahead of it waits for it.
func (l *eventLog) resume(seq int64, attempt int) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A log that writes a later attempt than the reader's holds all it
	// will of the reader's attempt: the reader's lost events are not
	// coming, and it goes back to what the log holds (else it would skip
	// the later attempt's events numbered up to its own).
	ended := l.done || max(l.attempt, 1) > max(attempt, 1)
	after, _ := resumeAfter(l.evs, seq, attempt, ended)
	return after
}

// resumeAfter returns the seq after which a reader that last received
// event (seq, attempt) goes on, in a log holding evs (ascending, from seq
// 1): after seq when the log's event seq is that event. Else the event
// was lost with the attempt that sent it (its server stopped before
// storing it) and a later attempt numbered its own events from there, so
// the reader goes back to the last event of its attempt or an earlier one
// that the log holds, and receives what the store holds from there. While
// the log may still grow with the reader's attempt (ended false) and has
// no event seq yet, settled is false: the reader waits and asks again.
func resumeAfter(evs []*Event, seq int64, attempt int, ended bool) (after int64, settled bool) {
	if seq <= 0 {
		return 0, true
	}
	if seq <= int64(len(evs)) {
		if sameAttempt(evs[seq-1].Attempt, attempt) {
			return seq, true
		}
	} else if !ended && (len(evs) == 0 || sameAttempt(evs[len(evs)-1].Attempt, attempt)) {
		return seq, false
	}
	tail := int64(0)
	for _, ev := range evs {
		if ev.Seq >= seq || max(ev.Attempt, 1) > attempt {
			break
		}
		tail = ev.Seq
	}
	return tail, true
}

// sameAttempt compares attempts, 0 (not recorded) counting as the first.
func sameAttempt(a, b int) bool { return max(a, 1) == max(b, 1) }

// reopen makes a closed (not released) log take events again, for the
// next attempt of its run; its readers follow on.
func (l *eventLog) reopen(attempt int) {
	<-l.stopped
	l.mu.Lock()
	l.closing, l.failures, l.attempt = false, 0, attempt
	l.kick, l.closeNow, l.stopped = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	l.mu.Unlock()
	go l.persist()
}

// close stops the log and waits until every event is stored; readers
// see it complete only after release, once the run has let go of its
// thread (so a client whose stream ends finds the thread free).
func (l *eventLog) close() {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		<-l.stopped
		return
	}
	l.closing = true
	close(l.closeNow)
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	<-l.stopped
}

// release tells the log's readers it is complete.
func (l *eventLog) release() {
	l.close()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.done = true
		close(l.wake)
		l.wake = make(chan struct{})
	}
}

// persist writes new events to the store until the log is finished.
func (l *eventLog) persist() {
	defer close(l.stopped)
	for range l.kick {
		select {
		case <-time.After(persistDelay):
		case <-l.closeNow:
		}
		l.mu.Lock()
		batch, done := l.evs[l.persisted:], l.closing
		l.mu.Unlock()
		if len(batch) > 0 && !l.store(batch, done) {
			return // closing: give up rather than hold the run forever
		}
		if done {
			l.mu.Lock()
			left := len(l.evs) - l.persisted
			l.mu.Unlock()
			if left == 0 {
				return
			}
			select {
			case l.kick <- struct{}{}:
			default:
			}
		}
	}
}

// store writes a batch of events; it reports false when the log must give
// up (closing, and the store has failed five times in a row).
func (l *eventLog) store(batch []*Event, closing bool) bool {
	recs := make([]store.EventRecord, len(batch))
	for i, ev := range batch {
		recs[i] = l.record(ev)
	}
	err := l.rl.AppendEvents(context.Background(), l.run, recs)
	switch {
	case err == nil || errors.Is(err, store.ErrConflict):
		// A conflict: another process (a worker that took the run over)
		// logged these seqs; its events stand, these go.
		if err != nil {
			l.log.Warn("run events not stored: another process logged the run since", "run", l.run, "events", len(recs))
		}
		l.mu.Lock()
		l.persisted += len(batch)
		l.mu.Unlock()
		return true
	default:
		l.log.Warn("storing run events failed", "run", l.run, "events", len(recs), "err", err)
		if l.failures++; closing && l.failures >= 5 {
			return false
		}
		time.Sleep(persistDelay * time.Duration(l.failures))
		return true
	}
}

// record is an event as the store keeps it: a reference to a committed
// checkpoint where it has one, nothing but its name for a run's metadata
// event (its run, thread and attempt are known), else its data.
func (l *eventLog) record(ev *Event) store.EventRecord {
	se := storedEvent{Event: ev.Event, Data: ev.data}
	rec := store.EventRecord{Seq: ev.Seq, Attempt: ev.Attempt}
	if ev.Event == "metadata" && ev.ref == nil && string(ev.data) == string(runMetadata(l.run, l.thread, ev.Attempt)) {
		se.Data, se.Ref = nil, refRun
	}
	if r := ev.ref; r != nil {
		if r.stored {
			se.Data, se.Ref, se.TS = r.extra, r.kind, r.ts
			rec.Ref = &store.EventRef{Namespace: r.ns, Seq: r.seq}
		} else if b, err := l.build(ev); err == nil {
			se.Data = b
		} else {
			se.Event, se.Data = "error", raw(map[string]string{"error": "StreamError", "message": err.Error()})
		}
	}
	rec.Data, _ = json.Marshal(se) // events are JSON already
	return rec
}

// runMetadata is the metadata event that starts each attempt of a run.
func runMetadata(run, thread string, attempt int) json.RawMessage {
	return raw(map[string]any{"run_id": run, "thread_id": APIThreadID(thread), "attempt": attempt})
}

// storedEvents reads the log of a run on thread from the store; redact:
// what is built from its state is redacted (see eventRef).
func storedEvents(ctx context.Context, rl store.RunLog, run, thread string, redact bool, after int64, limit int) ([]*Event, error) {
	recs, err := rl.Events(ctx, run, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*Event, 0, len(recs))
	for _, r := range recs {
		var se storedEvent
		if err := json.Unmarshal(r.Data, &se); err != nil {
			return nil, fmt.Errorf("%w: run %q event %d: %v", store.ErrCorrupt, run, r.Seq, err)
		}
		ev := &Event{Seq: r.Seq, Attempt: r.Attempt, Event: se.Event, data: se.Data}
		if se.Ref == refRun {
			ev.data = runMetadata(run, thread, r.Attempt)
		} else if se.Ref != "" {
			if r.Ref == nil {
				return nil, fmt.Errorf("%w: run %q event %d: a %s event without its checkpoint", store.ErrCorrupt, run, r.Seq, se.Ref)
			}
			ev.data, ev.ref = nil, &eventRef{kind: se.Ref, ns: r.Ref.Namespace, seq: r.Ref.Seq, ts: se.TS, stored: true, redact: redact, extra: se.Data}
		}
		out = append(out, ev)
	}
	return out, nil
}

// EventID is an event's SSE id: the run and the event's seq in its log,
// and, past the run's first attempt, the attempt that sent it — so that an
// event lost with a server killed mid-run and the event a later attempt
// numbered the same never share an id.
func EventID(run string, seq int64, attempt int) string {
	id := run + ":" + strconv.FormatInt(seq, 10)
	if attempt > 1 {
		id += ":" + strconv.Itoa(attempt)
	}
	return id
}

// ParseEventID reads Last-Event-ID: "<run>:<seq>[:<attempt>]" of this run,
// or a seq; the attempt is 1 when the id names none. "-1", which the SDK
// sends to rejoin a run it has seen nothing of, is the start, as no id is.
func ParseEventID(run, id string) (int64, int, error) {
	if id == "" || id == "-1" {
		return 0, 1, nil
	}
	r, rest, found := strings.Cut(id, ":")
	if !found {
		rest, r = id, run
	}
	seqText, attemptText, qualified := strings.Cut(rest, ":")
	seq, err := strconv.ParseInt(seqText, 10, 64)
	attempt := 1
	if qualified && err == nil {
		attempt, err = strconv.Atoi(attemptText)
	}
	if err != nil || seq < 0 || attempt < 1 || r != run {
		return 0, 0, invalid("Last-Event-ID", "%q is not an event id of run %s (<run id>:<seq>[:<attempt>])", id, run)
	}
	return seq, attempt, nil
}

// ModeOf is the stream mode an SSE event belongs to ("" for metadata and
// error, which every stream carries).
func ModeOf(event string) string {
	name, _, _ := strings.Cut(event, "|")
	switch name {
	case "metadata", "error", "end":
		return ""
	case "messages/partial", "messages/complete", "messages/metadata":
		return "messages"
	case "messages":
		return "messages-tuple"
	}
	return name
}
