package server

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

	"github.com/cairn-dev/cairn/store"
)

// sseEvent is one event of a run's stream: its seq in the run's log, its
// SSE event name ("values", "updates|gate1", …) and its JSON data.
type sseEvent struct {
	Seq   int64           `json:"-"`
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// eventLog is the log of a run in progress: every event it streamed, in
// memory for the clients that follow it live, and written to the store
// in small batches so that a client that reconnects later, or to another
// server, reads the same events with the same ids.
type eventLog struct {
	run string
	rl  store.RunLog
	log *slog.Logger

	mu        sync.Mutex
	evs       []sseEvent
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

// newEventLog starts the log of a run whose earlier events (from a
// previous server) are prior.
func newEventLog(run string, rl store.RunLog, log *slog.Logger, prior []sseEvent) *eventLog {
	l := &eventLog{run: run, rl: rl, log: log, evs: prior, persisted: len(prior), wake: make(chan struct{}), kick: make(chan struct{}, 1), closeNow: make(chan struct{}), stopped: make(chan struct{})}
	go l.persist()
	return l
}

// append adds an event and wakes its readers.
func (l *eventLog) append(event string, data json.RawMessage) {
	l.mu.Lock()
	l.evs = append(l.evs, sseEvent{Seq: int64(len(l.evs) + 1), Event: event, Data: data})
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
func (l *eventLog) since(after int64) ([]sseEvent, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if after < 0 {
		after = 0
	}
	var out []sseEvent
	if int(after) < len(l.evs) {
		out = l.evs[after:]
	}
	return out, l.done, l.wake
}

// reopen makes a closed (not released) log take events again, for the
// next attempt of its run; its readers follow on.
func (l *eventLog) reopen() {
	<-l.stopped
	l.mu.Lock()
	l.closing, l.failures = false, 0
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
		if len(batch) > 0 {
			recs := make([]store.EventRecord, len(batch))
			for i, ev := range batch {
				b, _ := json.Marshal(ev) // events are JSON already
				recs[i] = store.EventRecord{Seq: ev.Seq, Data: b}
			}
			err := l.rl.AppendEvents(context.Background(), l.run, recs)
			switch {
			case err == nil || errors.Is(err, store.ErrConflict):
				// A conflict: another process (a worker that took the run
				// over) logged these seqs; its events stand, these go.
				if err != nil {
					l.log.Warn("run events not stored: another process logged the run since", "run", l.run, "events", len(recs))
				}
				l.mu.Lock()
				l.persisted += len(batch)
				l.mu.Unlock()
			default:
				l.log.Warn("storing run events failed", "run", l.run, "events", len(recs), "err", err)
				if l.failures++; done && l.failures >= 5 {
					return // closing: give up rather than hold the run forever
				}
				time.Sleep(persistDelay * time.Duration(l.failures))
			}
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

// storedEvents reads a run's log from the store.
func storedEvents(ctx context.Context, rl store.RunLog, run string, after int64, limit int) ([]sseEvent, error) {
	recs, err := rl.Events(ctx, run, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]sseEvent, 0, len(recs))
	for _, r := range recs {
		var ev sseEvent
		if err := json.Unmarshal(r.Data, &ev); err != nil {
			return nil, fmt.Errorf("%w: run %q event %d: %v", store.ErrCorrupt, run, r.Seq, err)
		}
		ev.Seq = r.Seq
		out = append(out, ev)
	}
	return out, nil
}

// eventID is an event's SSE id: the run and the event's seq in its log.
func eventID(run string, seq int64) string { return run + ":" + strconv.FormatInt(seq, 10) }

// parseEventID reads Last-Event-ID: "<run>:<seq>" of this run, or a seq.
func parseEventID(run, id string) (int64, error) {
	if id == "" {
		return 0, nil
	}
	r, seqText, found := strings.Cut(id, ":")
	if !found {
		seqText, r = id, run
	}
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil || seq < 0 || r != run {
		return 0, unprocessable("Last-Event-ID", "%q is not an event id of run %s (<run id>:<seq>)", id, run)
	}
	return seq, nil
}

// modeOf is the stream mode an SSE event belongs to ("" for metadata and
// error, which every stream carries).
func modeOf(event string) string {
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
