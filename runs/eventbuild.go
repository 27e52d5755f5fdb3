package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/cairn-dev/cairn/store"
)

// ErrEventGone: an event of a run's log was built from a checkpoint that is
// no longer stored (its thread was deleted or pruned since).
var ErrEventGone = fmt.Errorf("runs: %w: the checkpoint a run event was built from is no longer stored", store.ErrNotFound)

// EventData returns an event's data: an event that refers to a checkpoint
// is built from the state in hand while its run goes on, else read back
// once, the first time a reader needs it.
func (s *Service) EventData(ctx context.Context, thread string, ev *Event) (json.RawMessage, error) {
	r := ev.ref
	if r == nil {
		return ev.data, nil
	}
	if r.kind == refValues && r.doc != nil {
		// The state is in hand: built for each reader, not kept beside it
		// for as long as the run's log lives.
		return r.shown(s, r.doc.AppendJSON(nil)), nil
	}
	r.once.Do(func() {
		if r.built == nil {
			r.built, r.err = s.buildEvent(context.WithoutCancel(ctx), thread, r)
		}
	})
	return r.built, r.err
}

// eventBuilder builds the events of a run on thread for its log.
func (s *Service) eventBuilder(thread string) func(*Event) (json.RawMessage, error) {
	return func(ev *Event) (json.RawMessage, error) { return s.EventData(context.Background(), thread, ev) }
}

// buildEvent is what the stream sent for an event built from a
// checkpoint: the state in hand (a run still going), or the checkpoint
// read back.
func (s *Service) buildEvent(ctx context.Context, thread string, r *eventRef) (json.RawMessage, error) {
	cp, err := s.store.Load(ctx, store.LoadRequest{Thread: thread, Namespace: r.ns, Seq: r.seq})
	if err != nil {
		return nil, fmt.Errorf("%w (checkpoint %d%s of thread %q): %w", ErrEventGone, r.seq, nsSuffix(r.ns), thread, err)
	}
	switch r.kind {
	case refValues:
		return r.shown(s, cp.State.AppendJSON(nil)), nil
	case refFinal:
		return FinalOf(cp), nil
	case refCheckpoints:
		return r.shown(s, raw(checkpointPayload(cp))), nil
	case refDebug:
		return r.shown(s, raw(debugEvent(r.ts, cp.Seq-1, checkpointPayload(cp)))), nil
	case refInput, refDebugInput:
		p, err := s.inputPayload(ctx, cp)
		if err != nil {
			return nil, fmt.Errorf("%w (the input before checkpoint %d%s of thread %q): %w", ErrEventGone, r.seq, nsSuffix(r.ns), thread, err)
		}
		if r.kind == refDebugInput {
			return r.shown(s, raw(debugEvent(r.ts, cp.Seq-2, p))), nil
		}
		return r.shown(s, raw(p)), nil
	case refTask, refDebugTask:
		var task map[string]json.RawMessage
		if err := json.Unmarshal(r.extra, &task); err != nil {
			return nil, fmt.Errorf("%w: a task event's fields: %v", store.ErrCorrupt, err)
		}
		task["input"] = cp.State.AppendJSON(nil)
		if r.kind == refTask {
			return r.shown(s, raw(task)), nil
		}
		return r.shown(s, raw(map[string]any{"type": "task", "timestamp": r.ts, "step": r.seq, "payload": task})), nil
	}
	return nil, fmt.Errorf("%w: run event of unknown kind %q", store.ErrCorrupt, r.kind)
}

// RedactsFor reports whether the service redacts what is built from the
// state of a run of assistant id: unless the assistant redacts its state
// itself (an assistant no longer served: redacted).
func (s *Service) RedactsFor(id string) bool {
	a, ok := s.assistants[id]
	return !ok || !a.Info().RedactsState
}

// shown is what a stream shows of data built from a state: redacted
// unless the run's assistant redacted it when it was committed.
func (r *eventRef) shown(s *Service, data json.RawMessage) json.RawMessage {
	if r.redact {
		return s.redact.JSON(data)
	}
	return data
}

func nsSuffix(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}

// FinalOf is a checkpoint's state as join and wait answer it: with its
// pending interrupt as __interrupt__.
func FinalOf(cp store.Checkpoint) json.RawMessage {
	values := cp.State.AppendJSON(nil)
	if in := InterruptOf(cp); in != nil {
		var obj map[string]json.RawMessage
		if json.Unmarshal(values, &obj) == nil {
			obj["__interrupt__"] = raw([]Interrupt{*in})
			values = raw(obj)
		}
	}
	return values
}

// checkpointPayload is a checkpoints-mode event: the commit as a thread
// state.
func checkpointPayload(cp store.Checkpoint) map[string]any {
	return statePayload(StateView(cp))
}

// inputPayload is the checkpoints-mode event of the input view before cp,
// a run's input checkpoint.
func (s *Service) inputPayload(ctx context.Context, cp store.Checkpoint) (map[string]any, error) {
	v, err := s.InputView(ctx, cp)
	if err != nil {
		return nil, err
	}
	return statePayload(v), nil
}

// debugPayload is a debug event's checkpoint payload: the checkpoints-mode
// payload, with the checkpoint and its parent as history shows them
// (checkpoint, parent_checkpoint), as LangGraph's debug events carry them.
func debugPayload(p map[string]any) map[string]any {
	out := maps.Clone(p)
	out["checkpoint"], out["parent_checkpoint"] = refOf(p["config"]), refOf(p["parent_config"])
	return out
}

// debugEvent is a debug event of type checkpoint.
func debugEvent(ts string, step int64, p map[string]any) map[string]any {
	return map[string]any{"type": "checkpoint", "timestamp": ts, "step": step, "payload": debugPayload(p)}
}

// refOf is the checkpoint a config names (nil for none).
func refOf(cfg any) any {
	if m, ok := cfg.(map[string]any); ok {
		return m["configurable"]
	}
	return nil
}

// pauseValues is values mode's event at a pause, as LangGraph sends it:
// {"__interrupt__": [...]} alone — the node's interrupt, none for a static
// pause (interrupt_before/after) — the state having gone before it.
func pauseValues(head store.Checkpoint) json.RawMessage {
	ins := []Interrupt{}
	if in := InterruptOf(head); in != nil {
		ins = append(ins, *in)
	}
	return raw(map[string][]Interrupt{"__interrupt__": ins})
}
