package runs

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// apiModes are the stream modes a run accepts, and the runner's mode each
// one needs.
var apiModes = map[string]flow.StreamMode{
	"values": flow.StreamValues, "updates": flow.StreamUpdates, "messages": flow.StreamMessages, "messages-tuple": flow.StreamMessages,
	"custom": flow.StreamCustom, "checkpoints": flow.StreamCheckpoints, "tasks": flow.StreamTasks, "debug": flow.StreamDebug,
	"events": flow.StreamTasks,
}

// converter turns a run's flow events into the API's stream events, in
// the modes the run was asked for.
type converter struct {
	s         *Service
	thread    string
	run       string
	modes     map[string]bool
	subgraphs bool
	// redact: the assistant does not redact its state (eventRef.redact).
	redact bool
	// messages: the text of each streamed message so far (messages mode
	// sends the whole message each time, as messages/partial).
	messages map[string]*apiMessage
	// done: the ids of the messages this run's stream completed
	// (messages/complete) or sent whole (messages-tuple); shown: the
	// state's messages list as the last snapshot held it.
	done     map[string]bool
	shown    state.ListVersion
	streamed map[string]bool // ids of the messages chunks streamed
	ev       eventsState     // the events mode's
	// durable: the run commits each step before the next reads it
	// (durability sync), so a task's input is the checkpoint it read.
	durable bool
}

type apiMessage struct {
	Type          string           `json:"type"`
	Content       string           `json:"content"`
	ID            string           `json:"id"`
	ToolCallChunk []map[string]any `json:"tool_call_chunks,omitempty"`
}

func newConverter(s *Service, thread, run string, modes []string, subgraphs bool) *converter {
	c := &converter{s: s, thread: thread, run: run, modes: map[string]bool{}, subgraphs: subgraphs, messages: map[string]*apiMessage{}, done: map[string]bool{}, streamed: map[string]bool{}}
	for _, m := range modes {
		c.modes[m] = true
	}
	return c
}

// IsMode reports whether m is a stream mode a run accepts.
func IsMode(m string) bool {
	_, ok := apiModes[m]
	return ok
}

// flowModes are the runner's modes the API modes need: messages mode
// completes messages from the state after each step (values), and
// messages-tuple sends the messages a node returns whole (updates).
func flowModes(modes []string) []flow.StreamMode {
	var out []flow.StreamMode
	add := func(fm flow.StreamMode) {
		if !slices.Contains(out, fm) {
			out = append(out, fm)
		}
	}
	for _, m := range modes {
		add(apiModes[m])
		switch m {
		case "messages":
			add(flow.StreamValues)
		case "messages-tuple", "tasks", "debug": // a task's result is its update
			add(flow.StreamUpdates)
		case "events":
			add(flow.StreamMessages)
		}
	}
	return out
}

func (c *converter) name(mode string, ev flow.Event) string {
	if ev.Namespace != "" {
		return mode + "|" + APINamespace(ev.Namespace)
	}
	return mode
}

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// convert returns the stream events of one flow event. Those whose content
// a committed checkpoint holds refer to it (see Event).
func (c *converter) convert(ctx context.Context, ev flow.Event) []*Event {
	if ev.Namespace != "" && !c.subgraphs {
		return nil
	}
	out := c.events(ev)
	add := func(mode string, data json.RawMessage) {
		out = append(out, Inline(c.name(mode, ev), data))
	}
	ref := func(mode, kind string) {
		r := &eventRef{kind: kind, ns: ev.Namespace, seq: ev.Seq, stored: ev.Committed && ev.Thread == c.thread, redact: c.redact}
		out = append(out, &Event{Event: c.name(mode, ev), ref: r})
	}
	switch ev.Kind {
	case flow.EventValues:
		if c.modes["values"] && ev.State != nil {
			ref("values", refValues)
			out[len(out)-1].ref.doc = ev.State
		}
		out = append(out, c.complete(ev)...)
	case flow.EventUpdate:
		out = append(out, c.taskResult(ev)...)
		if c.modes["updates"] {
			add("updates", raw(map[string]json.RawMessage{ev.Node: orNull(ev.Payload)}))
		}
		out = append(out, c.returned(ev)...)
	case flow.EventSteer:
		if c.modes["updates"] { // messages a step took from the thread's inbox, as the update of "__inbox__"
			add("updates", raw(map[string]json.RawMessage{"__inbox__": orNull(ev.Payload)}))
		}
	case flow.EventCustom:
		if c.modes["custom"] {
			add("custom", orNull(ev.Payload))
		}
	case flow.EventMessage:
		out = append(out, c.message(ev)...)
	case flow.EventCheckpoint:
		out = append(out, c.checkpoint(ctx, ev)...)
	case flow.EventNodeStart, flow.EventNodeEnd:
		out = append(out, c.task(ev)...)
	case flow.EventInterrupt:
		if c.modes["updates"] { // a static pause (interrupt_before/after) has no interrupt: an empty list
			ins := []Interrupt{}
			if !ev.Static {
				ins = append(ins, Interrupt{ID: InterruptID(ev.Thread, ev.Namespace, ev.Seq), Value: orNull(ev.Payload), When: "during", ResponseSchema: ev.ResponseSchema})
			}
			add("updates", raw(map[string][]Interrupt{"__interrupt__": ins}))
		}
	}
	return out
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// checkpoint is a commit's checkpoints-mode and debug events: references
// to the checkpoint, built when read; a commit not stored yet (async
// durability) is read back at once, as far as the store has it. A run's
// input checkpoint comes with its input view before it (InputView).
func (c *converter) checkpoint(ctx context.Context, ev flow.Event) []*Event {
	if !c.modes["checkpoints"] && !c.modes["debug"] {
		return nil
	}
	var out []*Event
	if ev.Source == sourceInput {
		out = c.commitEvents(ctx, ev, true)
	}
	return append(out, c.commitEvents(ctx, ev, false)...)
}

// commitEvents are the checkpoints-mode and debug events of a commit, or
// of the input view before it (input).
func (c *converter) commitEvents(ctx context.Context, ev flow.Event, input bool) []*Event {
	kind, debugKind, step := refCheckpoints, refDebug, ev.Seq-1
	if input {
		kind, debugKind, step = refInput, refDebugInput, ev.Seq-2
	}
	var out []*Event
	stored := ev.Committed && ev.Thread == c.thread
	var payload map[string]any
	if !stored {
		payload = c.unstored(ctx, ev, input)
	}
	if c.modes["checkpoints"] {
		if stored {
			out = append(out, &Event{Event: c.name("checkpoints", ev), ref: &eventRef{kind: kind, ns: ev.Namespace, seq: ev.Seq, stored: true, redact: c.redact}})
		} else {
			out = append(out, Inline(c.name("checkpoints", ev), raw(payload)))
		}
	}
	if c.modes["debug"] {
		ts := APITime(ev.Time)
		if stored {
			out = append(out, &Event{Event: c.name("debug", ev), ref: &eventRef{kind: debugKind, ns: ev.Namespace, seq: ev.Seq, ts: ts, stored: true, redact: c.redact}})
		} else {
			out = append(out, Inline(c.name("debug", ev), raw(debugEvent(ts, step, payload))))
		}
	}
	return out
}

// unstored is the checkpoints-mode payload of a commit the store may not
// hold yet (or of the input view before it): its values as far as they
// can be read.
func (c *converter) unstored(ctx context.Context, ev flow.Event, input bool) map[string]any {
	if cp, err := c.s.store.Load(ctx, store.LoadRequest{Thread: ev.Thread, Namespace: ev.Namespace, Seq: ev.Seq}); err == nil {
		if !input {
			return checkpointPayload(cp)
		}
		if p, err := c.s.inputPayload(ctx, cp); err == nil {
			return p
		}
	}
	cfg := func(seq int64) any {
		if seq == 0 {
			return nil
		}
		return map[string]any{"configurable": NewCheckpointRef(ev.Thread, ev.Namespace, seq)}
	}
	next := orEmpty(ev.Next)
	if input {
		next = []string{flow.START}
	}
	return map[string]any{"config": cfg(ev.Seq), "parent_config": cfg(ev.Parent), "next": next, "values": json.RawMessage("{}"), "metadata": map[string]any{}, "tasks": []Task{}}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// taskKey is a task's key as the API shows it: the engine's key
// ("thread/seq/node", "thread/ns/seq/node") with the thread's API id, its
// tenant left out.
func (c *converter) taskKey(key string) string {
	if tenant, _ := store.SplitThreadKey(c.thread); tenant != "" {
		return strings.TrimPrefix(key, tenant+"/")
	}
	return key
}

// task is a tasks-mode (and debug) event of a task's start — its input
// the state it read, by reference to that checkpoint, and what
// triggered it — or of its failed end. A task that succeeds ends with
// its update (taskResult).
func (c *converter) task(ev flow.Event) []*Event {
	if !c.modes["tasks"] && !c.modes["debug"] {
		return nil
	}
	id := c.taskKey(ev.Key)
	if ev.Kind == flow.EventNodeEnd {
		if ev.Err == "" {
			return nil // taskResult sends it, with the update
		}
		return c.taskEvents(ev, "task_result", raw(map[string]any{"id": id, "name": ev.Node, "error": ev.Err, "result": nil, "interrupts": []Interrupt{}}), nil)
	}
	head := map[string]any{"id": id, "name": ev.Node, "triggers": []string{"branch:to:" + ev.Node}, "interrupts": []Interrupt{}}
	if !c.durable || ev.Seq == 0 {
		head["input"] = nil
		return c.taskEvents(ev, "task", raw(head), nil)
	}
	return c.taskEvents(ev, "task", raw(head), func(kind, ts string) *eventRef {
		return &eventRef{kind: kind, ns: ev.Namespace, seq: ev.Seq, ts: ts, stored: true, redact: c.redact, extra: raw(head)}
	})
}

// taskResult is the tasks-mode (and debug) event of a task that
// succeeded: its update as its result.
func (c *converter) taskResult(ev flow.Event) []*Event {
	if (!c.modes["tasks"] && !c.modes["debug"]) || ev.Key == "" {
		return nil
	}
	return c.taskEvents(ev, "task_result", raw(map[string]any{"id": c.taskKey(ev.Key), "name": ev.Node, "error": nil, "result": orNull(ev.Payload), "interrupts": []Interrupt{}}), nil)
}

// taskEvents sends a task event in the tasks and debug modes asked for:
// its payload inline, or, with ref, built from the checkpoint the task
// read (the payload with the state as its input).
func (c *converter) taskEvents(ev flow.Event, kind string, payload json.RawMessage, ref func(kind, ts string) *eventRef) []*Event {
	var out []*Event
	if c.modes["tasks"] {
		if ref != nil {
			out = append(out, &Event{Event: c.name("tasks", ev), ref: ref(refTask, "")})
		} else {
			out = append(out, Inline(c.name("tasks", ev), payload))
		}
	}
	if c.modes["debug"] {
		ts := APITime(ev.Time)
		if ref != nil {
			out = append(out, &Event{Event: c.name("debug", ev), ref: ref(refDebugTask, ts)})
		} else {
			out = append(out, Inline(c.name("debug", ev), raw(map[string]any{"type": kind, "timestamp": ts, "step": ev.Seq, "payload": payload})))
		}
	}
	return out
}

// messageMeta is the metadata of a messages-tuple event.
func (c *converter) messageMeta(ev flow.Event, agent string) map[string]any {
	meta := map[string]any{"langgraph_node": ev.Node, "langgraph_checkpoint_ns": APINamespace(ev.Namespace), "langgraph_step": ev.Seq, "run_id": c.run, "thread_id": APIThreadID(c.thread)}
	if agent != "" {
		meta["agent"] = agent
	}
	return meta
}

// message is a messages event: in messages-tuple mode each chunk with its
// metadata, in messages mode the message so far (messages/metadata first).
func (c *converter) message(ev flow.Event) []*Event {
	var ch struct {
		ID       string `json:"id"`
		Agent    string `json:"agent"`
		Text     string `json:"text"`
		ToolCall *struct {
			Index int    `json:"index"`
			ID    string `json:"id"`
			Name  string `json:"name"`
			Args  string `json:"args"`
		} `json:"tool_call"`
	}
	if json.Unmarshal(ev.Payload, &ch) != nil {
		return nil
	}
	meta := c.messageMeta(ev, ch.Agent)
	c.streamed[ch.ID] = true
	var tc []map[string]any
	if t := ch.ToolCall; t != nil {
		tc = []map[string]any{{"index": t.Index, "id": t.ID, "name": t.Name, "args": t.Args}}
	}
	var out []*Event
	if c.modes["messages-tuple"] {
		chunk := apiMessage{Type: "AIMessageChunk", Content: ch.Text, ID: ch.ID, ToolCallChunk: tc}
		out = append(out, Inline(c.name("messages", ev), raw([]any{chunk, meta})))
	}
	if c.modes["messages"] {
		m, seen := c.messages[ch.ID]
		if !seen {
			m = &apiMessage{Type: "ai", ID: ch.ID}
			c.messages[ch.ID] = m
			out = append(out, Inline(c.name("messages/metadata", ev), raw(map[string]any{ch.ID: map[string]any{"metadata": meta}})))
		}
		m.Content += ch.Text
		m.ToolCallChunk = append(m.ToolCallChunk, tc...)
		out = append(out, Inline(c.name("messages/partial", ev), raw([]apiMessage{*m})))
	}
	return out
}
