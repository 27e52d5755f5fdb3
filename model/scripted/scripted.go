package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/internal/readfile"
	"github.com/cairn-dev/cairn/model/internal/httperr"
)

// ErrScript: the script file is malformed.
var ErrScript = errors.New("scripted: invalid script")

type reply struct {
	Text      *string    `yaml:"text"`
	JSON      *yaml.Node `yaml:"json"`
	ToolCalls []toolCall `yaml:"tool_calls"`
	Step      string     `yaml:"step"`
	DelayMS   int        `yaml:"delay_ms"`
	// ChunkDelayMS spaces the chunks of a streamed reply; ChunkChars
	// cuts its text in pieces of that many characters (0: word by word).
	ChunkDelayMS int            `yaml:"chunk_delay_ms"`
	ChunkChars   int            `yaml:"chunk_chars"`
	Error        *scriptedError `yaml:"error"`
	// EchoTool answers the content of the request's last tool message
	// (what the last tool returned) as the reply's text.
	EchoTool bool `yaml:"echo_tool"`
	// EchoUser answers this text with {user} replaced by the request's
	// last user message.
	EchoUser *string `yaml:"echo_user"`
	// User, when set, keeps the reply for calls whose last user message
	// contains it (letter case aside).
	User string `yaml:"user"`
	// PadTo right-pads the reply's text with x to this many bytes.
	PadTo int `yaml:"pad_to"`
	// Repeat: the reply is never used up.
	Repeat   bool `yaml:"repeat"`
	line     int
	jsonText json.RawMessage
}

type toolCall struct {
	Name string
	Args *yaml.Node
}

type scriptedError struct {
	Status       int    `yaml:"status"`
	Message      string `yaml:"message"`
	RetryAfterMS int    `yaml:"retry_after_ms"`
}

// Model answers from a script. Safe for concurrent use.
type Model struct {
	name    string
	replies []reply
	mu      sync.Mutex
	used    []bool
	calls   int
}

// Load reads a script file.
func Load(path string) (*Model, error) {
	b, err := readfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrScript, err)
	}
	return Parse(path, b)
}

// Parse reads a script; name is used in errors.
func Parse(name string, data []byte) (*Model, error) {
	list, err := repliesNode(name, data)
	if err != nil {
		return nil, err
	}
	m := &Model{name: name}
	for _, n := range list.Content {
		r, err := parseReply(name, n)
		if err != nil {
			return nil, err
		}
		m.replies = append(m.replies, r)
	}
	m.used = make([]bool, len(m.replies))
	return m, nil
}

// repliesNode finds the replies: list, the script's only key.
func repliesNode(name string, data []byte) (*yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrScript, name, err)
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: %s: want a mapping with a replies: list", ErrScript, name)
	}
	top := root.Content[0]
	var list *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		k := top.Content[i]
		if k.Value != "replies" {
			return nil, fmt.Errorf("%w: %s:%d: unknown key %q (want replies)", ErrScript, name, k.Line, k.Value)
		}
		list = top.Content[i+1]
	}
	if list == nil || list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%w: %s: replies: must be a list", ErrScript, name)
	}
	return list, nil
}

// parseReply decodes and checks one reply. json: and tool_calls: hold
// free-form YAML: their nodes are taken as they are; the rest is decoded
// into the struct.
func parseReply(name string, n *yaml.Node) (reply, error) {
	var r reply
	if n.Kind != yaml.MappingNode {
		return r, fmt.Errorf("%w: %s:%d: a reply must be a mapping", ErrScript, name, n.Line)
	}
	rest := &yaml.Node{Kind: yaml.MappingNode, Tag: n.Tag, Line: n.Line, Column: n.Column}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !allowedKeys[k.Value] {
			return r, fmt.Errorf("%w: %s:%d: unknown key %q (text, json, tool_calls, echo_tool, echo_user, step, user, pad_to, repeat, delay_ms, chunk_delay_ms, chunk_chars, error)", ErrScript, name, k.Line, k.Value)
		}
		switch k.Value {
		case "json":
			r.JSON = v
		case "tool_calls":
			calls, err := parseToolCalls(name, v)
			if err != nil {
				return r, err
			}
			r.ToolCalls = calls
		default:
			rest.Content = append(rest.Content, k, v)
		}
	}
	if err := rest.Decode(&r); err != nil {
		return r, fmt.Errorf("%w: %s:%d: %v", ErrScript, name, n.Line, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	r.line = n.Line
	return r, r.check(name)
}

// check checks a decoded reply and encodes its json: value.
func (r *reply) check(name string) error {
	kinds := 0
	for _, set := range []bool{r.Text != nil, r.JSON != nil, r.ToolCalls != nil, r.Error != nil, r.EchoTool, r.EchoUser != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return fmt.Errorf("%w: %s:%d: a reply needs exactly one of the keys text, json, tool_calls, echo_tool: true, echo_user or error", ErrScript, name, r.line)
	}
	if r.JSON != nil {
		var v any
		if err := r.JSON.Decode(&v); err != nil {
			return fmt.Errorf("%w: %s:%d: json: %v", ErrScript, name, r.line, err)
		}
		b, err := json.Marshal(agent.YAMLValue(v))
		if err != nil {
			return fmt.Errorf("%w: %s:%d: json: %v", ErrScript, name, r.line, err)
		}
		r.jsonText = b
	}
	for i, tc := range r.ToolCalls {
		if tc.Name == "" {
			return fmt.Errorf("%w: %s:%d: tool call %d needs a name", ErrScript, name, r.line, i)
		}
	}
	if r.Error != nil && r.Error.Status == 0 {
		return fmt.Errorf("%w: %s:%d: error: needs a status", ErrScript, name, r.line)
	}
	if r.DelayMS < 0 || r.ChunkDelayMS < 0 || r.ChunkChars < 0 || r.PadTo < 0 {
		return fmt.Errorf("%w: %s:%d: delay_ms, chunk_delay_ms, chunk_chars and pad_to must not be negative", ErrScript, name, r.line)
	}
	if r.PadTo > 0 && r.Text == nil && r.EchoUser == nil && !r.EchoTool {
		return fmt.Errorf("%w: %s:%d: pad_to pads a text reply (text, echo_user, echo_tool)", ErrScript, name, r.line)
	}
	return nil
}

func parseToolCalls(name string, v *yaml.Node) ([]toolCall, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%w: %s:%d: tool_calls: must be a list", ErrScript, name, v.Line)
	}
	calls := []toolCall{}
	for _, c := range v.Content {
		if c.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%w: %s:%d: a tool call must be a mapping with the keys name and args", ErrScript, name, c.Line)
		}
		var tc toolCall
		for i := 0; i+1 < len(c.Content); i += 2 {
			k, val := c.Content[i], c.Content[i+1]
			switch k.Value {
			case "name":
				if val.Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("%w: %s:%d: tool call name must be a string", ErrScript, name, val.Line)
				}
				tc.Name = val.Value
			case "args":
				tc.Args = val
			default:
				return nil, fmt.Errorf("%w: %s:%d: unknown tool call key %q (name, args)", ErrScript, name, k.Line, k.Value)
			}
		}
		calls = append(calls, tc)
	}
	return calls, nil
}

var allowedKeys = map[string]bool{"text": true, "json": true, "tool_calls": true, "echo_tool": true, "echo_user": true, "step": true, "user": true,
	"pad_to": true, "repeat": true, "delay_ms": true, "chunk_delay_ms": true, "chunk_chars": true, "error": true}

// Generate implements agent.Model.
func (m *Model) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	resp, _, err := m.respond(ctx, req)
	return resp, err
}

// respond answers a call with the next reply that fits it, and returns
// that reply too.
func (m *Model) respond(ctx context.Context, req agent.Request) (agent.Response, reply, error) {
	start := time.Now()
	m.mu.Lock()
	m.calls++
	call := m.calls
	m.markAnswered(req.Messages)
	idx := m.choose(req)
	if idx >= 0 && !m.replies[idx].Repeat {
		m.used[idx] = true
	}
	m.mu.Unlock()
	if idx < 0 {
		return agent.Response{}, reply{}, &agent.ProviderError{Provider: "scripted", Err: agent.ErrScriptDone,
			Message: fmt.Sprintf("no reply left in %s for call %d (step %q)", m.name, call, req.Step)}
	}
	r := m.replies[idx]
	if r.DelayMS > 0 {
		select {
		case <-time.After(time.Duration(r.DelayMS) * time.Millisecond):
		case <-ctx.Done():
			return agent.Response{}, reply{}, ctx.Err()
		}
	}
	in := 0
	for i := range req.Messages {
		in += len(req.Messages[i].Content)
	}
	if r.Error != nil {
		return agent.Response{}, reply{}, &agent.ProviderError{Provider: "scripted", Status: r.Error.Status, Message: r.Error.Message,
			RetryAfter: time.Duration(r.Error.RetryAfterMS) * time.Millisecond, Err: httperr.ForStatus(r.Error.Status)}
	}
	msg, err := m.message(r, req)
	if err != nil {
		return agent.Response{}, reply{}, err
	}
	out := len(msg.Content)
	for _, tc := range msg.ToolCalls {
		out += len(tc.Name) + len(tc.Args)
	}
	raw, _ := json.Marshal(map[string]any{"script": m.name, "line": r.line}) // plain values always marshal
	return agent.Response{Message: msg, Usage: agent.Usage{Input: int64(in/4 + 1), Output: int64(out/4 + 1)},
		Model: "scripted", Latency: time.Since(start), Raw: raw}, r, nil
}

// choose picks the reply for a call (m.mu held): the first unused one of
// the call's step, else the first unused one without a step; a reply
// with user: only when the last user message contains it. -1: none.
func (m *Model) choose(req agent.Request) int {
	user := strings.ToLower(lastUser(req.Messages))
	fits := func(i int, step string) bool {
		r := m.replies[i]
		return !m.used[i] && r.Step == step && strings.Contains(user, strings.ToLower(r.User))
	}
	steps := []string{""}
	if req.Step != "" {
		steps = []string{req.Step, ""}
	}
	for _, step := range steps {
		for i := range m.replies {
			if fits(i, step) {
				return i
			}
		}
	}
	return -1
}

// message is the assistant message a reply makes for a request.
func (m *Model) message(r reply, req agent.Request) (agent.Message, error) {
	msg := agent.Message{Role: agent.RoleAssistant}
	switch {
	case r.Text != nil:
		msg.Content = *r.Text
	case r.jsonText != nil:
		msg.Content = string(r.jsonText)
	case r.EchoTool:
		echo, ok := lastToolResult(req.Messages)
		if !ok {
			return agent.Message{}, &agent.ProviderError{Provider: "scripted", Err: agent.ErrMalformed, Message: fmt.Sprintf("%s:%d: echo_tool: the conversation has no tool result", m.name, r.line)}
		}
		msg.Content = echo
	case r.EchoUser != nil:
		msg.Content = strings.ReplaceAll(*r.EchoUser, "{user}", lastUser(req.Messages))
	default:
		for i, tc := range r.ToolCalls {
			var v any
			if tc.Args == nil {
				v = map[string]any{}
			} else if err := tc.Args.Decode(&v); err != nil {
				return agent.Message{}, &agent.ProviderError{Provider: "scripted", Err: agent.ErrMalformed, Message: fmt.Sprintf("%s:%d: args: %v", m.name, r.line, err)}
			}
			if v == nil {
				v = map[string]any{}
			}
			args, err := json.Marshal(agent.YAMLValue(v))
			if err != nil {
				return agent.Message{}, &agent.ProviderError{Provider: "scripted", Err: agent.ErrMalformed, Message: err.Error()}
			}
			msg.ToolCalls = append(msg.ToolCalls, agent.ToolCall{ID: fmt.Sprintf("call_%d_%d", r.line, i), Name: tc.Name, Args: args})
		}
	}
	if n := r.PadTo - len(msg.Content); n > 0 {
		msg.Content += strings.Repeat("x", n)
	}
	return msg, nil
}

// markAnswered marks as used the tool-call replies the conversation
// already holds (m.mu held): the same calls, with the ids this script
// gives them. A conversation replayed in another process (a tool loop
// resumed after a crash, whose completed calls come from the store) then
// gets the replies that follow, as the first process would have.
func (m *Model) markAnswered(msgs []agent.Message) {
	if !m.callsLeft() {
		return
	}
	for k := range msgs {
		msg := &msgs[k] // a message is large: read it in place
		if msg.Role != agent.RoleAssistant || len(msg.ToolCalls) == 0 {
			continue
		}
		for i, r := range m.replies {
			if !m.used[i] && r.answers(msg.ToolCalls) {
				m.used[i] = true
				break
			}
		}
	}
}

// callsLeft reports whether a reply with tool calls is still unused (m.mu
// held): only those can be marked.
func (m *Model) callsLeft() bool {
	for i := range m.replies {
		if !m.used[i] && len(m.replies[i].ToolCalls) > 0 {
			return true
		}
	}
	return false
}

// answers reports whether calls are this reply's tool calls, ids included.
func (r reply) answers(calls []agent.ToolCall) bool {
	if len(r.ToolCalls) == 0 || len(calls) != len(r.ToolCalls) {
		return false
	}
	for i, tc := range r.ToolCalls {
		if calls[i].Name != tc.Name || calls[i].ID != fmt.Sprintf("call_%d_%d", r.line, i) {
			return false
		}
	}
	return true
}

var _ agent.Model = (*Model)(nil)

// lastUser is the content of the last user message ("" if none).
func lastUser(msgs []agent.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == agent.RoleUser {
			return msgs[i].Content
		}
	}
	return ""
}

// lastToolResult is the content of the last tool message.
func lastToolResult(msgs []agent.Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == agent.RoleTool {
			return msgs[i].Content, true
		}
	}
	return "", false
}
