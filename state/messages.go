package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/cairn-dev/cairn/internal/jsontext"
)

// RemoveAllMessages is the id of a removal marker that clears the list
// (LangGraph's REMOVE_ALL_MESSAGES).
const RemoveAllMessages = "__remove_all__"

// Message is the common shape of a chat message. The messages reducer works
// on any JSON object with an "id"; extra fields are kept as they are.
type Message struct {
	ID         string          `json:"id,omitempty"`
	Role       string          `json:"role,omitempty"`
	Content    string          `json:"content,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Type       string          `json:"type,omitempty"`
}

// RemoveMessage returns the marker that, sent to a messages field, deletes
// the message with that id.
func RemoveMessage(id string) Message { return Message{ID: id, Type: "remove"} }

// RemoveAll returns the marker that clears a messages field.
func RemoveAll() Message { return Message{ID: RemoveAllMessages, Type: "remove"} }

// messageHead is the part of a message the reducer reads.
type messageHead struct {
	ID   *string `json:"id"`
	Type string  `json:"type"`
}

// messageID returns the string id of a message object.
func messageID(raw json.RawMessage) (string, bool) {
	if firstByte(raw) != '{' {
		return "", false
	}
	h, err := readHead(raw)
	if err != nil || h.ID == nil {
		return "", false
	}
	return *h.ID, true
}

// reduceMessages is LangGraph's add_messages: new messages are appended; a
// message whose id exists replaces it in place; a removal marker deletes by
// id (an unknown id is an error) and the remove-all marker clears the list.
// Messages without an id get one.
func reduceMessages(a *applier, field string, cur *value, upd json.RawMessage) (*value, error) {
	elems, err := updateElements(upd)
	if err != nil {
		return nil, err
	}
	l, err := a.startList(field, cur)
	if err != nil {
		return nil, err
	}
	start := l
	base := FieldPointer(field)
	for i, e := range elems {
		if firstByte(e) != '{' {
			return nil, fmt.Errorf("%w: message %d is %s, not an object", ErrInvalidUpdate, i, kindOfRaw(e))
		}
		h, err := readHead(e)
		if err != nil {
			return nil, fmt.Errorf("%w: message %d: %v", ErrInvalidUpdate, i, err)
		}
		if h.Type == "remove" {
			if h.ID == nil {
				return nil, fmt.Errorf("%w: removal %d has no id", ErrInvalidUpdate, i)
			}
			if *h.ID == RemoveAllMessages {
				l = newList(nil)
				a.emit(OpReplace, base, json.RawMessage("[]"))
				continue
			}
			p, ok := l.indexOf(*h.ID)
			if !ok {
				return nil, fmt.Errorf("%w: remove %q", ErrMessageNotFound, *h.ID)
			}
			l = l.removed(p)
			a.emit(OpRemove, base+"/"+strconv.Itoa(p), nil)
			continue
		}
		var id string
		if h.ID == nil {
			id = a.id()
			e = withID(e, id)
		} else if p, ok := l.indexOf(*h.ID); ok {
			l = l.replaced(p, e)
			a.emit(OpReplace, base+"/"+strconv.Itoa(p), e)
			continue
		} else {
			id = *h.ID
		}
		l = l.appendedWithID(e, id)
		a.emit(OpAdd, base+"/-", e)
	}
	if l == start {
		return listValue(cur, l), nil
	}
	return &value{list: l}, nil
}

// withID returns the message object with an "id" member added first.
func withID(msg json.RawMessage, id string) json.RawMessage {
	out := make([]byte, 0, len(msg)+len(id)+8)
	out = append(out, `{"id":`...)
	out = jsontext.AppendString(out, id)
	rest := bytes.TrimSpace(msg[1:])
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// WithMessageIDs returns an update (a JSON object of fields) with the id
// Apply, given newID, gives each message of a messages field that has
// none: the update as the state records it, which LangGraph's streams
// show (its reducer writes the ids into the update). Other values are
// left as they are; an update that is not an object, or has no message
// without an id, is returned as it is.
func (s *Schema) WithMessageIDs(upd json.RawMessage, newID func() string) json.RawMessage {
	if !s.hasMessages || firstByte(upd) != '{' {
		return upd
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(upd, &m) != nil {
		return upd
	}
	changed := false
	for _, k := range slices.Sorted(maps.Keys(m)) { // Apply's order
		if s.fields[k] != ReducerMessages {
			continue
		}
		if v, ok := withIDs(m[k], newID); ok {
			m[k], changed = v, true
		}
	}
	if !changed {
		return upd
	}
	b, err := json.Marshal(m)
	if err != nil {
		return upd
	}
	return b
}

// withIDs gives the messages of a messages field's update without an id
// the ids the reducer would, in its order, and reports whether any.
func withIDs(v json.RawMessage, newID func() string) (json.RawMessage, bool) {
	elems, err := updateElements(v)
	if err != nil {
		return v, false
	}
	changed := false
	for i, e := range elems {
		if firstByte(e) != '{' {
			break // the reducer refuses the update
		}
		h, err := readHead(e)
		if err != nil || h.Type == "remove" || h.ID != nil {
			continue
		}
		elems[i], changed = withID(e, newID()), true
	}
	if !changed {
		return v, false
	}
	if firstByte(v) != '[' {
		return elems[0], true
	}
	b, err := json.Marshal(elems)
	return b, err == nil
}
