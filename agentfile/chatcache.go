package agentfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/state"
)

// ConversationCache keeps the conversations of chat threads (kind: chat)
// decoded from run to run. The model is given the whole conversation each
// turn; with the cache, reading it from the state compares each message
// with the one the last turn read (the same bytes, usually the very same
// slice: the state shares what did not change) and decodes only the new
// and changed ones, instead of decoding the whole conversation again. It
// holds at most its size in messages (their JSON), dropping the threads
// used least recently. Safe for concurrent use; a program that serves a
// chat keeps one for it (RunConfig.Conversations), as cairn serve does.
type ConversationCache struct {
	mu      sync.Mutex
	max     int64
	size    int64
	clock   uint64
	threads map[string]*decodedConversation
}

// decodedConversation is a thread's messages as its last turn read them:
// each one's JSON, what the model gets of it, and the request built from
// them, which the next turn extends in place.
type decodedConversation struct {
	raw  []json.RawMessage
	msgs []agent.Message
	// req is the system message, then msgs with the tool calls a later
	// message left open answered notRun; open are the calls still open at
	// its end.
	req  []agent.Message
	open []agent.ToolCall
	// seen is the version of the state's list the messages were read
	// from (state.Doc.Unchanged).
	seen  state.ListVersion
	bytes int64
	used  uint64
}

// NewConversationCache returns a cache of at most maxBytes of messages
// (their JSON; the decoded copies take about as much again).
func NewConversationCache(maxBytes int64) *ConversationCache {
	return &ConversationCache{max: maxBytes, threads: map[string]*decodedConversation{}}
}

// take removes and returns what the cache holds for key (nil: nothing, or
// no cache): the run that took it extends it and puts it back, so two runs
// of one thread never share one.
func (c *ConversationCache) take(key string) *decodedConversation {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.threads[key]
	if d != nil {
		c.size -= d.bytes
		delete(c.threads, key)
	}
	return d
}

// put keeps d for key, dropping the threads used least recently while the
// cache holds more than its size (d itself when it alone is larger).
func (c *ConversationCache) put(key string, d *decodedConversation) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.threads[key]; old != nil {
		c.size -= old.bytes
		delete(c.threads, key)
	}
	if d.bytes > c.max {
		return
	}
	c.clock++
	d.used = c.clock
	c.threads[key] = d
	c.size += d.bytes
	for c.size > c.max {
		var lru string
		for k, t := range c.threads {
			if lru == "" || t.used < c.threads[lru].used {
				lru = k
			}
		}
		c.size -= c.threads[lru].bytes
		delete(c.threads, lru)
	}
}

// newConversation starts a conversation's request with the system
// message.
func newConversation(system string) *decodedConversation {
	d := &decodedConversation{}
	if system != "" {
		d.req = []agent.Message{{Role: agent.RoleSystem, Content: system}}
	}
	return d
}

// add appends a message of the state and extends the request with it.
func (d *decodedConversation) add(raw json.RawMessage, m agent.Message) {
	d.raw, d.msgs, d.bytes = append(d.raw, raw), append(d.msgs, m), d.bytes+int64(len(raw))
	if m.Role != agent.RoleTool {
		d.req = appendNotRun(d.req, d.open)
		d.open = nil
	}
	switch m.Role {
	case agent.RoleAssistant:
		d.open = slices.Clone(m.ToolCalls)
	case agent.RoleTool:
		d.open = slices.DeleteFunc(d.open, func(tc agent.ToolCall) bool { return tc.ID == m.ToolCallID })
	}
	d.req = append(d.req, m)
}

// truncate keeps the first n messages and builds the request again.
func (d *decodedConversation) truncate(n int, system string) {
	raw, msgs := d.raw[:n], d.msgs[:n]
	*d = *newConversation(system)
	for i := range raw {
		d.add(raw[i], msgs[i])
	}
}

// request is the model's messages: req, with the calls still open
// answered notRun.
func (d *decodedConversation) request() []agent.Message {
	req := slices.Clip(d.req)
	if len(d.open) == 0 {
		return req
	}
	return appendNotRun(req, d.open)
}

// appendNotRun answers calls with notRun.
func appendNotRun(req []agent.Message, calls []agent.ToolCall) []agent.Message {
	for _, tc := range calls {
		req = append(req, agent.Message{Role: agent.RoleTool, ToolCallID: tc.ID, Name: tc.Name, Content: notRun})
	}
	return req
}

// sameBytes reports whether two JSON texts are equal, looking at their
// memory first.
func sameBytes(a, b json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || bytes.Equal(a, b)
}

// decodeMessage is what the model gets of message i of the state.
func decodeMessage(i int, raw json.RawMessage) (agent.Message, error) {
	var m storedMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return agent.Message{}, fmt.Errorf("agentfile: the chat's message %d: %w", i, err)
	}
	msg := agent.Message{Content: contentText(m.Content), Name: m.Name}
	switch m.kind() {
	case "human":
		msg.Role = agent.RoleUser
	case "system":
		msg.Role = agent.RoleSystem
	case "ai":
		msg.Role, msg.ToolCalls = agent.RoleAssistant, m.calls()
	case "tool":
		msg.Role, msg.ToolCallID = agent.RoleTool, m.ToolCallID
	default:
		return agent.Message{}, fmt.Errorf("%w: message %d of the state has type %q (human, ai, system or tool)", ErrChatInput, i, m.Type+m.Role)
	}
	return msg, nil
}
