package runs

import (
	"encoding/json"

	"github.com/cairn-dev/cairn/flow"
)

// eventsState is what the events mode remembers of a run's stream: the
// messages a node is streaming, to end them when it ends.
type eventsState struct {
	started bool
	open    map[string][]string // node key → ids of the messages it streams
	text    map[string]*apiMessage
}

// streamEvent is one event of LangChain's event stream (astream_events
// v2), as LangGraph's events mode sends it.
func (c *converter) streamEvent(ev flow.Event, kind, name, runID string, data any) *Event {
	return Inline(c.name("events", ev), streamEventData(c.thread, c.run, ev, kind, name, runID, data))
}

// streamEventData is a stream event's data: what happened (kind), to
// what (name, runID), within which run (parent_ids), with the node's
// place in metadata.
func streamEventData(thread, run string, ev flow.Event, kind, name, runID string, data any) json.RawMessage {
	md := map[string]any{"thread_id": APIThreadID(thread), "run_id": run}
	if ev.Node != "" {
		md["langgraph_node"], md["langgraph_step"], md["langgraph_checkpoint_ns"] = ev.Node, ev.Seq, APINamespace(ev.Namespace)
	}
	parents := []string{}
	if runID != run {
		parents = append(parents, run)
	}
	return raw(map[string]any{"event": kind, "name": name, "run_id": runID, "tags": []string{}, "metadata": md, "data": data, "parent_ids": parents})
}

// graphEnd is the events mode's last event of a run that did not fail.
func graphEnd(thread, run string) *Event {
	return Inline("events", streamEventData(thread, run, flow.Event{}, "on_chain_end", "LangGraph", run, map[string]any{"output": nil}))
}

// events is the events-mode stream of one flow event: the graph's and
// each node's on_chain_start and on_chain_end, and a model's
// on_chat_model_start, _stream (each chunk) and _end (when its node
// ends) for each message a node streams.
func (c *converter) events(ev flow.Event) []*Event {
	if !c.modes["events"] {
		return nil
	}
	var out []*Event
	if !c.ev.started {
		c.ev = eventsState{started: true, open: map[string][]string{}, text: map[string]*apiMessage{}}
		out = append(out, c.streamEvent(flow.Event{}, "on_chain_start", "LangGraph", c.run, map[string]any{"input": nil}))
	}
	return append(out, c.eventsOf(ev)...)
}

func (c *converter) eventsOf(ev flow.Event) []*Event {
	switch ev.Kind {
	case flow.EventNodeStart:
		return []*Event{c.streamEvent(ev, "on_chain_start", ev.Node, c.taskKey(ev.Key), map[string]any{"input": nil})}
	case flow.EventNodeEnd:
		var out []*Event
		for _, id := range c.ev.open[ev.Key] {
			out = append(out, c.streamEvent(ev, "on_chat_model_end", "model", id, map[string]any{"output": c.ev.text[id]}))
			delete(c.ev.text, id)
		}
		delete(c.ev.open, ev.Key)
		return append(out, c.streamEvent(ev, "on_chain_end", ev.Node, c.taskKey(ev.Key), map[string]any{"output": orNull(ev.Payload)}))
	case flow.EventMessage:
		return c.modelEvents(ev)
	}
	return nil
}

// modelEvents are a streamed chunk's: on_chat_model_start before a
// message's first, then on_chat_model_stream.
func (c *converter) modelEvents(ev flow.Event) []*Event {
	var ch struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	}
	if json.Unmarshal(ev.Payload, &ch) != nil || ch.ID == "" {
		return nil
	}
	var out []*Event
	m, seen := c.ev.text[ch.ID]
	if !seen {
		m = &apiMessage{Type: "ai", ID: ch.ID}
		c.ev.text[ch.ID] = m
		c.ev.open[ev.Key] = append(c.ev.open[ev.Key], ch.ID)
		out = append(out, c.streamEvent(ev, "on_chat_model_start", "model", ch.ID, map[string]any{"input": nil}))
	}
	m.Content += ch.Text
	chunk := apiMessage{Type: "AIMessageChunk", Content: ch.Text, ID: ch.ID}
	return append(out, c.streamEvent(ev, "on_chat_model_stream", "model", ch.ID, map[string]any{"chunk": chunk}))
}
