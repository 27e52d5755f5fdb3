package agentfile

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
)

// The kinds of agent file (front matter kind:).
const (
	// KindChain is a chain of steps (the default): each run starts a
	// fresh chain state, {agent_id, steps, final_output, input}.
	KindChain = "chain"
	// KindChat is a chat assistant: its state is the conversation of its
	// thread, {messages}, under add_messages, kept from run to run. Each
	// run adds its input's messages, then the model answers the whole
	// conversation (the file's system prompt and instructions as the
	// system message) in node agent; when the reply calls tools, node
	// tools runs them and adds their results, and the model answers
	// again, until a reply calls none (or the run's step limit, 25 by
	// default, is reached). approve_tools: makes the calls of the tools
	// it names (all: every tool) wait for a person's review: node tools
	// raises a flow.Interrupt whose value is LangChain's HITLRequest (or,
	// with review_format: agent-inbox, agent-inbox's HumanInterrupt list),
	// and applies the answers — a HITLResponse ({decisions: [{type:
	// approve|edit|reject}]}), a list of HumanResponse ({type:
	// accept|edit|response|ignore, args}), one a call in order, or a
	// flow.Approval (approve: accept all; edit:
	// {call id or tool name: arguments}; reject: response with the reason,
	// or ignore without one). An ignored call ends the turn.
	// interrupt_before: [tools] pauses before every round of tool calls
	// instead (a static pause, without an interrupt value).
	KindChat = "chat"
)

// The nodes of a chat.
const (
	ChatAgentNode = "agent"
	ChatToolsNode = "tools"
)

// MessagesField is a chat's one state field.
const MessagesField = "messages"

// chatSchema is a chat's state.
var chatSchema = state.MustSchema(state.WithField(MessagesField, state.ReducerMessages))

// IsChat reports whether the file declares a chat (kind: chat).
func (a *File) IsChat() bool { return a.Kind == KindChat }

// checkChat checks a chat's front matter and body: no chain, schemas,
// output or handoff; no step sections; a system message; pauses before
// its nodes only.
func (a *File) checkChat(bodyLine int) error {
	for _, key := range []string{"chain", "schemas", "output", "handoff"} {
		if line, ok := a.keyLines[key]; ok {
			return &FileError{File: a.Path, Line: line, Msg: fmt.Sprintf("%s: is for chains; a chat (kind: chat) answers its conversation with one model call a turn and its tools", key)}
		}
	}
	if len(a.Sections) > 0 {
		secs := slices.SortedFunc(maps.Keys(a.Sections), func(x, y string) int { return a.sectionLines[x] - a.sectionLines[y] })
		return &FileError{File: a.Path, Line: bodyLine + a.sectionLines[secs[0]], Msg: fmt.Sprintf("\"## %s\": a chat has no steps; its \"## Instructions\" are its system message", secs[0])}
	}
	if a.Instructions == "" && a.System == "" {
		return &FileError{File: a.Path, Line: bodyLine, Msg: "a chat needs a \"## Instructions\" section: its system message"}
	}
	for _, id := range a.InterruptBefore {
		line := a.keyLines["interrupt_before"]
		switch {
		case id != ChatAgentNode && id != ChatToolsNode:
			return &FileError{File: a.Path, Line: line, Msg: fmt.Sprintf("interrupt_before: %q is not a node of a chat (agent, tools)", id)}
		case id == ChatToolsNode && len(a.Tools) == 0:
			return &FileError{File: a.Path, Line: line, Msg: "interrupt_before: tools pauses before tool calls, but the chat has no tools:"}
		}
	}
	if err := a.checkApproveTools(); err != nil {
		return err
	}
	if _, _, err := a.Approval.Deadline(); err != nil {
		return &FileError{File: a.Path, Line: a.keyLines["approval"], Msg: err.Error()}
	}
	if a.Approval.Timeout != "" && len(a.InterruptBefore) == 0 && a.ApproveTools.none() {
		return &FileError{File: a.Path, Line: a.keyLines["approval"], Msg: "approval.timeout needs approve_tools: or interrupt_before: [tools] (or agent) to pause at"}
	}
	if err := a.checkResponseSchema(); err != nil {
		return err
	}
	return a.checkShared()
}

// chat runs a chat's nodes.
type chat struct {
	system string
	model  agent.Model
	tools  []agent.Tool
	specs  []agent.ToolSpec
	cache  *ConversationCache // nil: none
	// approve: the tools whose calls wait for a person (approve_tools);
	// format: the shape of the review's interrupt (review_format).
	approve ToolApproval
	format  string
}

// compileChat builds a chat's graph: START → agent, then tools and back
// to agent while the model calls tools (agent → END without tools).
func (a *File) compileChat(model agent.Model, tools []agent.Tool, cache *ConversationCache) (*flow.Compiled, error) {
	c := &chat{system: strings.TrimSpace(a.System + "\n\n" + a.Instructions), model: model, tools: tools, cache: cache, approve: a.ApproveTools, format: a.ReviewFormat}
	for _, t := range tools {
		c.specs = append(c.specs, t.Spec())
	}
	g := flow.NewGraph(chatSchema).AddNode(ChatAgentNode, c.agent).AddEdge(flow.START, ChatAgentNode)
	if len(tools) == 0 {
		return g.AddEdge(ChatAgentNode, flow.END).Compile()
	}
	g = g.AddNode(ChatToolsNode, c.runTools).AddRouter(ChatAgentNode, c.route)
	if c.approve.none() {
		return g.AddEdge(ChatToolsNode, ChatAgentNode).Compile()
	}
	return g.AddRouter(ChatToolsNode, c.afterTools).Compile()
}

// agent answers the conversation with one model call, streamed in
// messages mode; the reply's id is its stream's (so a front end merges
// the tokens it saw with the message the state keeps).
func (c *chat) agent(ctx context.Context, d state.Doc) (state.Update, error) {
	msgs, err := c.conversation(ctx, d)
	if err != nil {
		return nil, err
	}
	resp, err := agent.Generate(ctx, c.model, agent.Request{Messages: msgs, Tools: c.specs, Step: ChatAgentNode})
	flow.AddTokens(ctx, resp.Usage.Input, resp.Usage.Output)
	if err != nil {
		return nil, err
	}
	info, _ := flow.Info(ctx)
	msg, err := aiMessage(info.Key+"/model", resp.Message)
	if err != nil {
		return nil, err
	}
	return state.Update{MessagesField: []json.RawMessage{msg}}, nil
}

// route goes to tools when the reply calls tools, else to the end.
func (c *chat) route(ctx context.Context, d state.Doc) ([]flow.Target, error) {
	calls, err := lastToolCalls(d)
	if err != nil || len(calls) == 0 {
		return flow.To(flow.END), err
	}
	return flow.To(ChatToolsNode), nil
}

// runTools runs the tool calls of the last reply, in order, and adds a
// tool message for each. Each result is recorded in the step's journal as
// it arrives, so a step cut short by a crash does not run a completed
// call again; each call's ToolContext.Key is the task's key and
// "/tool/<index>". Calls that wait for review (approve_tools) are
// answered first (see reviews); an edit replaces the reply, with the
// edited arguments, ahead of the tool messages.
func (c *chat) runTools(ctx context.Context, d state.Doc) (state.Update, error) {
	calls, err := lastToolCalls(d)
	if err != nil {
		return nil, err
	}
	revs, err := c.reviews(ctx, calls)
	if err != nil {
		return nil, err
	}
	info, _ := flow.Info(ctx)
	tc := agent.ToolContext{KV: state.NewKV(d), State: d}
	out := make([]json.RawMessage, 0, len(calls)+1)
	edited := false
	for i, call := range calls {
		name := "tool/" + strconv.Itoa(i)
		tc.Key = info.Key + "/" + name
		switch rv := revs[i]; rv.Type {
		case ReviewResponse, ReviewIgnore:
			out = append(out, reviewedMessage(tc.Key, call, rv))
			continue
		case ReviewEdit:
			call.Args, calls[i].Args, edited = rv.Args, rv.Args, true
		}
		tr, err := c.callTool(ctx, name, call, tc)
		if err != nil {
			return nil, err
		}
		out = append(out, toolMessage(tc.Key, call, tr))
	}
	if edited {
		reply, err := editedReply(d, calls)
		if err != nil {
			return nil, err
		}
		out = append([]json.RawMessage{reply}, out...)
	}
	return state.Update{MessagesField: out}, nil
}

// callTool answers a call from the journal, or runs it and records it.
func (c *chat) callTool(ctx context.Context, name string, call agent.ToolCall, tc agent.ToolContext) (agent.ToolResult, error) {
	raw, ok, err := flow.Recorded(ctx, name)
	if err != nil {
		return agent.ToolResult{}, err
	}
	var tr agent.ToolResult
	if ok && json.Unmarshal(raw, &tr) == nil && tr.ID == call.ID {
		flow.BeginCall(ctx) // the call keeps its position among the task's calls
		return tr, nil
	}
	tr = agent.RunTool(ctx, c.tools, call, tc)
	if _, err := flow.Record(ctx, name, tr); err != nil {
		return tr, fmt.Errorf("agentfile: recording %s: %w", name, err)
	}
	return tr, nil
}
