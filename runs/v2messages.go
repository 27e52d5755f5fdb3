package runs

import (
	"encoding/json"
	"slices"
)

// message turns a messages-tuple event ([chunk, metadata]) into the
// protocol's message events: message-start and content-block-start for a
// new AI message, a text delta per chunk; the message finishes when its
// node's update or the state comes (finishMessages).
func (c *v2Conv) message(ns []string, data json.RawMessage) {
	var pair []json.RawMessage
	if json.Unmarshal(data, &pair) != nil || len(pair) == 0 {
		return
	}
	var chunk struct {
		Type    string          `json:"type"`
		ID      string          `json:"id"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(pair[0], &chunk) != nil || chunk.ID == "" {
		return
	}
	if chunk.Type != "AIMessageChunk" && chunk.Type != "ai" {
		return // the state brings other messages whole
	}
	var meta struct {
		Node string `json:"langgraph_node"`
	}
	if len(pair) > 1 {
		_ = json.Unmarshal(pair[1], &meta)
	}
	m := c.openMessage(chunk.ID, ns, meta.Node)
	if t := contentText(chunk.Content); t != "" {
		m.text.WriteString(t)
		c.emit("messages", ns, m.node, map[string]any{"event": "content-block-delta", "index": 0,
			"delta": map[string]any{"type": "text-delta", "text": t}})
	}
}

// openMessage returns the streaming message of id, starting it first.
func (c *v2Conv) openMessage(id string, ns []string, node string) *v2Message {
	for _, m := range c.open {
		if m.id == id {
			return m
		}
	}
	m := &v2Message{id: id, node: node, ns: ns}
	c.open = append(c.open, m)
	c.emit("messages", ns, node, map[string]any{"event": "message-start", "role": "ai", "id": id,
		"metadata": map[string]any{"run_id": c.run, "thread_id": c.thread}})
	c.emit("messages", ns, node, map[string]any{"event": "content-block-start", "index": 0,
		"content": map[string]any{"type": "text", "text": ""}})
	return m
}

// finishMessages finishes the streaming messages of a namespace (nil:
// every one).
func (c *v2Conv) finishMessages(ns []string) {
	keep := c.open[:0]
	for _, m := range c.open {
		if ns != nil && !slices.Equal(m.ns, ns) {
			keep = append(keep, m)
			continue
		}
		c.emit("messages", m.ns, m.node, map[string]any{"event": "content-block-finish", "index": 0,
			"content": map[string]any{"type": "text", "text": m.text.String()}})
		c.emit("messages", m.ns, m.node, map[string]any{"event": "message-finish"})
	}
	clear(c.open[len(keep):])
	c.open = keep
}

// contentText is a message chunk's text: its content string, or its text
// blocks'.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	out := ""
	for _, b := range blocks {
		if b.Type == "text" {
			out += b.Text
		}
	}
	return out
}

// v2ToolMessage is what the tools channel reads of an update's messages.
type v2ToolMessage struct {
	Type      string `json:"type"`
	ToolCalls []struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Content    json.RawMessage `json:"content"`
	Status     string          `json:"status"`
}

// tools sends the tool calls a node's update asks for (tool-started) and
// the results it brings (tool-finished, tool-error).
func (c *v2Conv) tools(ns []string, node string, update json.RawMessage) {
	var u struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(update, &u) != nil {
		return
	}
	for _, raw := range u.Messages {
		var m v2ToolMessage
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		switch {
		case m.Type == "ai":
			for _, tc := range m.ToolCalls {
				c.emit("tools", ns, node, map[string]any{"event": "tool-started", "tool_call_id": tc.ID, "tool_name": tc.Name, "input": tc.Args})
			}
		case m.Type == "tool" && m.Status == "error":
			c.emit("tools", ns, node, map[string]any{"event": "tool-error", "tool_call_id": m.ToolCallID, "message": contentText(m.Content)})
		case m.Type == "tool":
			c.emit("tools", ns, node, map[string]any{"event": "tool-finished", "tool_call_id": m.ToolCallID, "output": raw}) // the ToolMessage, as LangGraph's on_tool_end gives it
		}
	}
}
