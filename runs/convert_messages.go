package runs

import (
	"encoding/json"

	"github.com/cairn-dev/cairn/flow"
)

// messagesField is the state field whose messages the messages modes
// complete and send whole, as LangGraph reads values.messages.
const messagesField = "messages"

// complete is messages mode's messages/complete event after a step of the
// root graph: the messages of the state's messages list this run's
// stream has not completed yet (the input's first, then each node's), as
// LangGraph completes them from each values snapshot. It looks only at
// the elements past those the last snapshot shared with this one, so a
// long conversation costs what its steps added, after the run's first
// snapshot.
func (c *converter) complete(ev flow.Event) []*Event {
	if !c.modes["messages"] || ev.Namespace != "" || ev.State == nil {
		return nil
	}
	from := ev.State.Unchanged(messagesField, c.shown)
	c.shown = ev.State.ListVersion(messagesField)
	var fresh []json.RawMessage
	for _, el := range ev.State.ElementsFrom(messagesField, from) {
		if id := messageID(el); id != "" && !c.done[id] {
			c.done[id] = true
			fresh = append(fresh, el)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	return []*Event{Inline(c.name("messages/complete", ev), raw(fresh))}
}

// returned is messages-tuple mode's events for the messages a node returns
// whole (a tool's result, a reply from a model that does not stream):
// each message of its update's messages that no chunk of this run
// streamed, once, with its metadata, as LangGraph sends them.
func (c *converter) returned(ev flow.Event) []*Event {
	if !c.modes["messages-tuple"] || (ev.Namespace != "" && !c.subgraphs) || len(ev.Payload) == 0 {
		return nil
	}
	var upd map[string]json.RawMessage
	if json.Unmarshal(ev.Payload, &upd) != nil {
		return nil
	}
	var list []json.RawMessage
	if json.Unmarshal(upd[messagesField], &list) != nil {
		list = []json.RawMessage{upd[messagesField]} // one message, not a list
	}
	var out []*Event
	for _, el := range list {
		if !isMessage(el) {
			continue
		}
		id := messageID(el)
		switch {
		case id == "": // sent as returned: nothing names it again
		case c.done[id] || c.messages[id] != nil || c.streamed[id]:
			continue
		default:
			c.done[id] = true
		}
		out = append(out, Inline(c.name("messages", ev), raw([]any{el, c.messageMeta(ev, "")})))
	}
	return out
}

// isMessage reports whether a JSON value is a message as LangGraph reads
// one: an object with content and a type or role.
func isMessage(el json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(el, &m) != nil {
		return false
	}
	_, content := m["content"]
	_, typ := m["type"]
	_, role := m["role"]
	return content && (typ || role)
}

// messageID is a message's id ("" when it is not a message with one).
func messageID(el json.RawMessage) string {
	var m struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(el, &m) != nil {
		return ""
	}
	return m.ID
}
