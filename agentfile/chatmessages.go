package agentfile

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
)

// storedMessage is a message of a chat's state as its nodes read it
// (LangGraph's shape, or the role shape of a state written otherwise).
type storedMessage struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []toolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	// ResponseMetadata.Review names a person's answer to the call of a
	// tool message they did not let run (response, ignore).
	ResponseMetadata reviewMeta `json:"response_metadata"`
}

// kind is the message's type: human, ai, system or tool ("" if unknown).
func (m storedMessage) kind() string {
	if t, ok := messageTypes[m.Type]; ok {
		return t
	}
	return messageTypes[m.Role]
}

// calls are the message's tool calls as the model sees them.
func (m storedMessage) calls() []agent.ToolCall {
	out := make([]agent.ToolCall, 0, len(m.ToolCalls))
	for _, tc := range m.ToolCalls {
		out = append(out, agent.ToolCall{ID: tc.ID, Name: tc.Name, Args: tc.Args})
	}
	return out
}

// notRun is what the model reads for a tool call of the conversation that
// has no result: the person did not approve it, or a new message came
// before it ran.
const notRun = "error: the tool call was not run"

// conversation is what the model answers: the system message, then every
// message of the state, decoded, or taken from what the thread's last
// turn decoded (the cache) where the state holds the same bytes. A tool
// call left without a result gets one (notRun) in the request only, so
// that the conversation stays one a model accepts; the state keeps what
// happened.
func (c *chat) conversation(ctx context.Context, d state.Doc) ([]agent.Message, error) {
	info, _ := flow.Info(ctx)
	key := info.Thread + "\x00" + info.Namespace
	dc := c.cache.take(key)
	if dc == nil {
		dc = newConversation(c.system)
	}
	// The messages the list still shares with the version the last turn
	// read are the ones it decoded: only what came after is walked.
	n := min(d.Unchanged(MessagesField, dc.seen), len(dc.raw))
	for i, raw := range d.ElementsFrom(MessagesField, n) {
		n = i + 1
		if i < len(dc.raw) {
			if sameBytes(dc.raw[i], raw) {
				continue
			}
			dc.truncate(i, c.system) // a message changed (replaced, removed): from here on, decode
		}
		m, err := decodeMessage(i, raw)
		if err != nil {
			return nil, err
		}
		dc.add(raw, m)
	}
	if n < len(dc.raw) {
		dc.truncate(n, c.system)
	}
	dc.seen = d.ListVersion(MessagesField)
	c.cache.put(key, dc)
	return dc.request(), nil
}

// contentText is the text of a message's content: the string, or the
// text of its text blocks (other blocks, such as images, are left out).
func contentText(raw json.RawMessage) string {
	switch firstByteOf(raw) {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	case '[':
		var blocks []json.RawMessage
		_ = json.Unmarshal(raw, &blocks)
		var b strings.Builder
		for _, blk := range blocks {
			var s string
			var obj struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(blk, &s) == nil {
				b.WriteString(s)
			} else if json.Unmarshal(blk, &obj) == nil && obj.Type == "text" {
				b.WriteString(obj.Text)
			}
		}
		return b.String()
	}
	return ""
}

// aiWire is a reply as the state keeps it (LangGraph's AI message).
type aiWire struct {
	ID        string     `json:"id"`
	Type      string     `json:"type"`
	Content   string     `json:"content"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

// aiMessage is the model's reply in the state's shape.
func aiMessage(id string, m agent.Message) (json.RawMessage, error) {
	w := aiWire{ID: id, Type: "ai", Content: m.Content}
	for _, tc := range m.ToolCalls {
		args := tc.Args
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		if !json.Valid(args) {
			return nil, fmt.Errorf("agentfile: the model called tool %q with arguments that are not JSON", tc.Name)
		}
		w.ToolCalls = append(w.ToolCalls, toolCall{ID: tc.ID, Name: tc.Name, Args: args, Type: "tool_call"})
	}
	return json.Marshal(w)
}

// toolWire is a tool's result as the state keeps it (LangGraph's tool
// message).
type toolWire struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Content    string `json:"content"`
	Name       string `json:"name"`
	ToolCallID string `json:"tool_call_id"`
	Status     string `json:"status"`
	// ResponseMetadata is set on a call the person answered instead.
	ResponseMetadata *reviewMeta `json:"response_metadata,omitempty"`
}

// toolMessage is a tool call's result in the state's shape: a string
// result as it is, any other as its JSON, a failure as "error: …" with
// status error.
func toolMessage(id string, call agent.ToolCall, tr agent.ToolResult) json.RawMessage {
	w := toolWire{ID: id, Type: "tool", Name: call.Name, ToolCallID: call.ID, Status: "success"}
	switch {
	case tr.Error != "":
		w.Content, w.Status = "error: "+tr.Error, "error"
	case json.Unmarshal(tr.Output, &w.Content) == nil:
	default:
		w.Content = string(tr.Output)
	}
	b, _ := json.Marshal(w) // strings always marshal
	return b
}

// lastMessage is the newest message of a chat's state (ok false when
// there is none).
func lastMessage(d state.Doc) (storedMessage, bool, error) {
	n, _ := d.ListLen(MessagesField)
	raw, ok := d.Element(MessagesField, n-1)
	if !ok {
		return storedMessage{}, false, nil
	}
	var m storedMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, false, fmt.Errorf("agentfile: the chat's last message: %w", err)
	}
	return m, true, nil
}

// lastToolCalls are the tool calls of the newest message, when it is a
// reply that calls tools.
func lastToolCalls(d state.Doc) ([]agent.ToolCall, error) {
	m, ok, err := lastMessage(d)
	if err != nil || !ok || m.kind() != "ai" {
		return nil, err
	}
	return m.calls(), nil
}

// lastReply is the text of the newest message as a JSON string, when it
// is a reply, or the tool message of a call the person ignored (which
// ends the turn): a run's final output; nil otherwise.
func lastReply(d state.Doc) json.RawMessage {
	m, ok, err := lastMessage(d)
	if err != nil || !ok || m.kind() != "ai" && m.ResponseMetadata.Review != ReviewIgnore {
		return nil
	}
	b, _ := json.Marshal(contentText(m.Content)) // a string always marshals
	return b
}
