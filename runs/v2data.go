package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cairn-dev/cairn/store"
)

// v2Data is what the protocol needs of an event of a run's log: inline
// data as logged; of an event built from a checkpoint, the state only
// where the reader wants values — a checkpoint's reference (id, parent,
// step, source) and a task's own fields are read without it, so that a
// turn's events cost what changed, not the whole state each.
func (s *Service) v2Data(ctx context.Context, thread string, ev *Event, values bool) (json.RawMessage, error) {
	r := ev.ref
	if r == nil {
		return s.EventData(ctx, thread, ev)
	}
	switch r.kind {
	case refValues, refFinal:
		if !values {
			return nil, nil
		}
		return s.EventData(ctx, thread, ev)
	case refTask:
		return r.extra, nil
	case refCheckpoints, refInput:
		cp, err := s.checkpointMeta(ctx, thread, r.ns, r.seq)
		if err != nil {
			return nil, err
		}
		if r.kind == refInput {
			return raw(statePayload(InputView(cp, json.RawMessage("{}")))), nil
		}
		return raw(checkpointPayload(cp)), nil
	}
	return nil, nil // debug events and the like are not the protocol's
}

// checkpointMeta is a checkpoint without its state.
func (s *Service) checkpointMeta(ctx context.Context, thread, ns string, seq int64) (store.Checkpoint, error) {
	for cp, err := range s.store.History(ctx, store.HistoryRequest{Thread: thread, Namespace: ns, Before: seq + 1, Limit: 1}) {
		if err != nil {
			return cp, err
		}
		if cp.Seq == seq {
			return cp, nil
		}
		break
	}
	return store.Checkpoint{}, fmt.Errorf("%w (checkpoint %d%s of thread %q): %w", ErrEventGone, seq, nsSuffix(ns), thread, store.ErrNotFound)
}

// v2ValuesAsk reports whether a run's input requests come from its
// values events: only when it logged no updates (a run made before, or
// by a client that asked for values alone), since the updates carry them
// otherwise and the events must be numbered alike whether or not a reader
// wants the values.
func v2ValuesAsk(d Data) bool { return !slices.Contains(d.Kwargs.StreamMode, "updates") }
