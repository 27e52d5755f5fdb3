package agentfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/cairn-dev/cairn/internal/jsontext"
)

// ErrChatInput: a chat's input (or a state update of its messages) is not
// a conversation: ChatInputError says where.
var ErrChatInput = errors.New("agentfile: invalid chat input")

// ChatInputError names the place of a problem in a chat's input: Path is
// a JSONPath from the input ("$", "$.messages[0].content").
type ChatInputError struct {
	Path string
	Msg  string
}

func (e *ChatInputError) Error() string { return e.Path + ": " + e.Msg }

// Unwrap returns ErrChatInput.
func (e *ChatInputError) Unwrap() error { return ErrChatInput }

func chatErr(path, format string, args ...any) error {
	return &ChatInputError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// messageTypes maps the types and roles a message may name (LangGraph's
// and OpenAI's) to the type the state keeps.
var messageTypes = map[string]string{
	"human": "human", "user": "human",
	"ai": "ai", "assistant": "ai",
	"system": "system", "developer": "system",
	"tool":   "tool",
	"remove": "remove",
}

// ChatMessages reads a chat's input — a string (one human message), or an
// object {"messages": …} whose messages are a string, one message or a
// list of them — and returns the messages it adds to the conversation in
// the state's shape (LangGraph's): each an object with its type (human,
// ai, system, tool; role user, assistant, system or tool is taken as
// the type), its content (a string or a list of content blocks), its id
// when it has one (the state gives one to each message without),
// tool_calls on an AI message ({id, name, args}), tool_call_id on a tool
// message; other members are kept. {"type": "remove", "id": ID} removes
// the message ID (add_messages' RemoveMessage). Null or empty input adds
// nothing. Errors are *ChatInputError.
func ChatMessages(input json.RawMessage) ([]json.RawMessage, error) {
	input = bytes.TrimSpace(input)
	if len(input) == 0 || string(input) == "null" {
		return nil, nil
	}
	switch input[0] {
	case '"':
		return readMessages("$", input)
	case '{':
		var top map[string]json.RawMessage
		if err := json.Unmarshal(input, &top); err != nil {
			return nil, chatErr("$", "not JSON: %v", err)
		}
		for _, k := range slices.Sorted(maps.Keys(top)) {
			if k != "messages" {
				return nil, chatErr("$."+k, "a chat's state has only messages: send {\"messages\": [...]}")
			}
		}
		return readMessages("$.messages", top["messages"])
	}
	return nil, chatErr("$", "want a string or {\"messages\": [...]}")
}

func firstByteOf(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// readMessages reads the value of messages: a string, a message or a
// list of them (null: none).
func readMessages(path string, raw json.RawMessage) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, chatErr(path, "not JSON: %v", err)
		}
		out := make([]json.RawMessage, 0, len(list))
		for i, m := range list {
			msg, err := normalizeMessage(path+"["+strconv.Itoa(i)+"]", m)
			if err != nil {
				return nil, err
			}
			out = append(out, msg)
		}
		return out, nil
	}
	msg, err := normalizeMessage(path, raw)
	if err != nil {
		return nil, err
	}
	return []json.RawMessage{msg}, nil
}

// normalizeMessage turns one message of the input into the state's shape.
func normalizeMessage(path string, raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if firstByteOf(raw) == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, chatErr(path, "not JSON: %v", err)
		}
		return encodeMessage(map[string]json.RawMessage{"type": json.RawMessage(`"human"`), "content": raw}), nil
	}
	var m map[string]json.RawMessage
	if firstByteOf(raw) != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, chatErr(path, "a message is a string or an object with type (or role) and content")
	}
	typ, err := messageType(path, m)
	if err != nil {
		return nil, err
	}
	delete(m, "role")
	m["type"], _ = json.Marshal(typ) // a string always marshals
	if err := checkID(path, m, typ == "remove"); err != nil {
		return nil, err
	}
	if typ == "remove" {
		return encodeMessage(map[string]json.RawMessage{"id": m["id"], "type": m["type"]}), nil
	}
	if err := checkMessage(path, typ, m); err != nil {
		return nil, err
	}
	return encodeMessage(m), nil
}

// messageType is the state's type of a message: its type, or its role.
func messageType(path string, m map[string]json.RawMessage) (string, error) {
	for _, key := range []string{"type", "role"} {
		v, ok := m[key]
		if !ok || string(v) == "null" {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", chatErr(path+"."+key, "want a string")
		}
		t, ok := messageTypes[s]
		if !ok {
			return "", chatErr(path+"."+key, "%q: want human, ai, system or tool (roles user, assistant, system, tool), or remove", s)
		}
		return t, nil
	}
	return "", chatErr(path, "a message needs a type (human, ai, system, tool) or a role (user, assistant, system, tool)")
}

// checkID checks a message's id (a non-empty string); a null id is
// dropped, so that the state gives the message one.
func checkID(path string, m map[string]json.RawMessage, required bool) error {
	v, ok := m["id"]
	if ok && string(v) == "null" {
		delete(m, "id")
		ok = false
	}
	if !ok {
		if required {
			return chatErr(path, "a removal needs the id of the message it removes")
		}
		return nil
	}
	var s string
	if json.Unmarshal(v, &s) != nil || s == "" {
		return chatErr(path+".id", "want a non-empty string")
	}
	return nil
}

// checkMessage checks the content, the name, the tool calls of an AI
// message and the tool_call_id of a tool message.
func checkMessage(path, typ string, m map[string]json.RawMessage) error {
	if err := checkContent(path+".content", m, typ == "ai"); err != nil {
		return err
	}
	if v, ok := m["name"]; ok && string(v) != "null" {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return chatErr(path+".name", "want a string")
		}
	}
	switch typ {
	case "ai":
		return normalizeToolCalls(path+".tool_calls", m)
	case "tool":
		var s string
		if json.Unmarshal(m["tool_call_id"], &s) != nil || s == "" {
			return chatErr(path+".tool_call_id", "a tool message needs the id of the tool call it answers")
		}
	default:
		if v, ok := m["tool_calls"]; ok && string(v) != "null" && string(v) != "[]" {
			return chatErr(path+".tool_calls", "only an AI message calls tools")
		}
	}
	return nil
}

// checkContent checks content: a string, or a list of content blocks (a
// string, or an object with a type). An AI message may leave it out.
func checkContent(path string, m map[string]json.RawMessage, optional bool) error {
	v, ok := m["content"]
	if !ok || string(v) == "null" {
		if !optional {
			return chatErr(path, "a message needs content: a string or a list of content blocks")
		}
		m["content"] = json.RawMessage(`""`)
		return nil
	}
	switch firstByteOf(v) {
	case '"':
		return nil
	case '[':
		var blocks []json.RawMessage
		if json.Unmarshal(v, &blocks) != nil {
			return chatErr(path, "want a string or a list of content blocks")
		}
		for i, b := range blocks {
			var blk struct {
				Type string `json:"type"`
			}
			if firstByteOf(b) == '"' {
				continue
			}
			if firstByteOf(b) != '{' || json.Unmarshal(b, &blk) != nil || blk.Type == "" {
				return chatErr(path+"["+strconv.Itoa(i)+"]", "a content block is a string or an object with a type (text, image_url, …)")
			}
		}
		return nil
	}
	return chatErr(path, "want a string or a list of content blocks")
}

// toolCall is a tool call as the state keeps it (LangGraph's).
type toolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
	Type string          `json:"type"`
}

// normalizeToolCalls checks an AI message's tool_calls and gives each
// the shape {id, name, args, type: tool_call}.
func normalizeToolCalls(path string, m map[string]json.RawMessage) error {
	v, ok := m["tool_calls"]
	if !ok || string(v) == "null" {
		delete(m, "tool_calls")
		return nil
	}
	var calls []map[string]json.RawMessage
	if json.Unmarshal(v, &calls) != nil {
		return chatErr(path, "want a list of tool calls {id, name, args}")
	}
	out := make([]toolCall, len(calls))
	for i, c := range calls {
		p := path + "[" + strconv.Itoa(i) + "]"
		tc := toolCall{Args: c["args"], Type: "tool_call"}
		if json.Unmarshal(c["id"], &tc.ID) != nil || tc.ID == "" {
			return chatErr(p+".id", "a tool call needs an id (a string)")
		}
		if json.Unmarshal(c["name"], &tc.Name) != nil || tc.Name == "" {
			return chatErr(p+".name", "a tool call needs a name (a string)")
		}
		if len(tc.Args) == 0 || string(tc.Args) == "null" {
			tc.Args = json.RawMessage("{}")
		} else if firstByteOf(tc.Args) != '{' {
			return chatErr(p+".args", "want an object of arguments")
		}
		out[i] = tc
	}
	if len(out) == 0 {
		delete(m, "tool_calls")
		return nil
	}
	m["tool_calls"], _ = json.Marshal(out) // checked JSON always marshals
	return nil
}

// encodeMessage writes a message object with id, type and content first,
// then its other members in the order of their names.
func encodeMessage(m map[string]json.RawMessage) json.RawMessage {
	out := []byte{'{'}
	add := func(k string) {
		v, ok := m[k]
		if !ok {
			return
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = jsontext.AppendString(out, k)
		out = append(out, ':')
		var buf bytes.Buffer
		if json.Compact(&buf, v) == nil {
			out = append(out, buf.Bytes()...)
		} else {
			out = append(out, v...)
		}
	}
	first := []string{"id", "type", "content"}
	for _, k := range first {
		add(k)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(first, k) {
			add(k)
		}
	}
	return append(out, '}')
}
