package agentfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
)

// ApproveAll is approve_tools: all, every tool call waits for a person.
const ApproveAll = "all"

// ToolApproval is a chat's approve_tools: the tools whose calls wait for
// a person's approval ([all] for every tool). In YAML it is all or a list
// of names from tools:.
type ToolApproval []string

// UnmarshalYAML reads all, a tool's name or a list of names (checked
// with the file, which knows its tools and lines).
func (t *ToolApproval) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		*t = ToolApproval{n.Value}
		return nil
	}
	var names []string
	if err := n.Decode(&names); err != nil {
		return errors.New("approve_tools: want all or a list of tool names")
	}
	*t = names
	return nil
}

// none reports whether no tool call waits.
func (t ToolApproval) none() bool { return len(t) == 0 }

// needs reports whether a call of tool name waits for approval (a
// listed "<server>.*" covers the server's tools).
func (t ToolApproval) needs(name string) bool {
	for _, n := range t {
		if n == ApproveAll || n == name || strings.HasSuffix(n, ".*") && strings.HasPrefix(name, strings.TrimSuffix(n, "*")) {
			return true
		}
	}
	return false
}

// checkApproveTools checks approve_tools: all, or names of tools: (a
// tool of a listed "<server>.*" included), each once.
func (a *File) checkApproveTools() error {
	line := a.keyLines["approve_tools"]
	if _, ok := a.keyLines["approve_tools"]; ok && len(a.ApproveTools) == 0 {
		return &FileError{File: a.Path, Line: line, Msg: "approve_tools: want all or a list of tool names (leave it out for none)"}
	}
	if len(a.ApproveTools) > 0 && len(a.Tools) == 0 {
		return &FileError{File: a.Path, Line: line, Msg: "approve_tools: the chat has no tools:"}
	}
	if slices.Contains(a.InterruptBefore, ChatToolsNode) && len(a.ApproveTools) > 0 {
		return &FileError{File: a.Path, Line: line, Msg: "approve_tools: and interrupt_before: [tools] both pause before tool calls; keep one"}
	}
	if err := a.checkReviewFormat(); err != nil {
		return err
	}
	for i, n := range a.ApproveTools {
		switch {
		case n == ApproveAll && len(a.ApproveTools) > 1:
			return &FileError{File: a.Path, Line: line, Msg: "approve_tools: all stands alone (it covers every tool)"}
		case n == ApproveAll:
		case slices.Contains(a.ApproveTools[:i], n):
			return &FileError{File: a.Path, Line: line, Msg: fmt.Sprintf("approve_tools: %q appears twice", n)}
		case !ToolApproval(a.Tools).needs(n) || strings.HasSuffix(n, ".*") && !slices.Contains(a.Tools, n):
			return &FileError{File: a.Path, Line: line, Msg: fmt.Sprintf("approve_tools: %q is not a tool of tools: (%s)", n, strings.Join(a.Tools, ", "))}
		}
	}
	return nil
}

// The review formats (review_format).
const (
	ReviewLangChain  = "langchain"
	ReviewAgentInbox = "agent-inbox"
)

// checkReviewFormat checks review_format: langchain or agent-inbox, with
// approve_tools.
func (a *File) checkReviewFormat() error {
	line, set := a.keyLines["review_format"]
	switch {
	case !set:
		return nil
	case a.ApproveTools.none():
		return &FileError{File: a.Path, Line: line, Msg: "review_format: without approve_tools: no tool call waits for review"}
	case a.ReviewFormat != ReviewLangChain && a.ReviewFormat != ReviewAgentInbox:
		return &FileError{File: a.Path, Line: line, Msg: fmt.Sprintf("review_format: %q: want langchain (the default) or agent-inbox", a.ReviewFormat)}
	}
	return nil
}

// HITLRequest is LangChain's request for a person's review of the tool
// calls of one reply (langchain.agents.middleware's HITLRequest): the
// calls that wait, and for each the decisions it allows. The answer is
// HITLResponse, {"decisions": [...]}, one decision a call, in order.
type HITLRequest struct {
	ActionRequests []HITLAction       `json:"action_requests"`
	ReviewConfigs  []HITLReviewConfig `json:"review_configs"`
}

// HITLAction is a call under review: the tool, its arguments and what
// the person is asked.
type HITLAction struct {
	Name        string          `json:"name"`
	Args        json.RawMessage `json:"args"`
	Description string          `json:"description,omitempty"`
}

// HITLReviewConfig says which decisions a call's review allows (all of
// them: approve, edit, reject).
type HITLReviewConfig struct {
	ActionName       string   `json:"action_name"`
	AllowedDecisions []string `json:"allowed_decisions"`
}

// The decisions of a HITLResponse (their type).
const (
	DecisionApprove = "approve"
	DecisionEdit    = "edit"
	DecisionReject  = "reject"
)

// HumanInterrupt is agent-inbox's request for a person's review of one
// tool call (review_format: agent-inbox; a list, one per call that
// waits).
type HumanInterrupt struct {
	ActionRequest ActionRequest `json:"action_request"`
	Config        ReviewConfig  `json:"config"`
	Description   string        `json:"description"`
}

// ActionRequest is a tool call under review: the tool and its arguments.
type ActionRequest struct {
	Action string          `json:"action"`
	Args   json.RawMessage `json:"args"`
}

// ReviewConfig says which answers a HumanInterrupt allows (all of them).
type ReviewConfig struct {
	AllowAccept  bool `json:"allow_accept"`
	AllowEdit    bool `json:"allow_edit"`
	AllowRespond bool `json:"allow_respond"`
	AllowIgnore  bool `json:"allow_ignore"`
}

// The answers a HumanResponse gives (its type).
const (
	ReviewAccept   = "accept"
	ReviewEdit     = "edit"
	ReviewResponse = "response"
	ReviewIgnore   = "ignore"
)

// reviewRequest is the value of the interrupt that asks for the review
// of calls, in format (review_format).
func reviewRequest(format string, calls []agent.ToolCall) any {
	if format == ReviewAgentInbox {
		return humanInterrupts(calls)
	}
	req := HITLRequest{ActionRequests: []HITLAction{}, ReviewConfigs: []HITLReviewConfig{}}
	for _, c := range calls {
		req.ActionRequests = append(req.ActionRequests, HITLAction{Name: c.Name, Args: callArgs(c),
			Description: fmt.Sprintf("The assistant calls tool %s; it runs once you approve (or edit) the call.", c.Name)})
		req.ReviewConfigs = append(req.ReviewConfigs, HITLReviewConfig{ActionName: c.Name,
			AllowedDecisions: []string{DecisionApprove, DecisionEdit, DecisionReject}})
	}
	return req
}

// humanInterrupts are agent-inbox's review requests of the calls that
// wait.
func humanInterrupts(calls []agent.ToolCall) []HumanInterrupt {
	out := make([]HumanInterrupt, 0, len(calls))
	for _, c := range calls {
		out = append(out, HumanInterrupt{ActionRequest: ActionRequest{Action: c.Name, Args: callArgs(c)},
			Config:      ReviewConfig{AllowAccept: true, AllowEdit: true, AllowRespond: true, AllowIgnore: true},
			Description: fmt.Sprintf("The assistant calls tool %s; it runs once you accept (or edit) the call.", c.Name)})
	}
	return out
}

// callArgs is a call's arguments ({} when it has none).
func callArgs(c agent.ToolCall) json.RawMessage {
	if len(c.Args) == 0 {
		return json.RawMessage("{}")
	}
	return c.Args
}

// reviewKey is the journal entry of node tools that keeps the answers of
// a review, so that a step re-run after a crash does not ask again.
const reviewKey = "review"

// reviews are the answers to the calls of a round (a zero review runs
// the call): none asked when no call waits (approve_tools); else the
// answers recorded in the step's journal, or the resume value's, or the
// step stops with an interrupt whose value is the HumanInterrupt list of
// the waiting calls.
func (c *chat) reviews(ctx context.Context, calls []agent.ToolCall) ([]review, error) {
	out := make([]review, len(calls))
	var idx []int
	var waiting []agent.ToolCall
	for i, call := range calls {
		if c.approve.needs(call.Name) {
			idx, waiting = append(idx, i), append(waiting, call)
		}
	}
	if len(waiting) == 0 {
		return out, nil
	}
	var revs []review
	raw, ok, err := flow.Recorded(ctx, reviewKey)
	if err != nil {
		return nil, err
	}
	if !ok || json.Unmarshal(raw, &revs) != nil || len(revs) != len(waiting) {
		var answer json.RawMessage
		if err := flow.Interrupt(ctx, reviewRequest(c.format, waiting), &answer); err != nil {
			return nil, err
		}
		if revs, err = readReviews(answer, waiting); err != nil {
			return nil, fmt.Errorf("agentfile: the answer to the review of tool calls: %w", err)
		}
		if _, err := flow.Record(ctx, reviewKey, revs); err != nil {
			return nil, fmt.Errorf("agentfile: recording the review: %w", err)
		}
	}
	for j, i := range idx {
		out[i] = revs[j]
	}
	return out, nil
}

// ignoredText is the tool message of a call the person ignored.
const ignoredText = "the person ignored this tool call; it was not run"

// reviewedMessage is the tool message of a call the person answered
// instead of running it: their text (response) or ignoredText, status
// error, response_metadata.review naming the answer.
func reviewedMessage(id string, call agent.ToolCall, rv review) json.RawMessage {
	w := toolWire{ID: id, Type: "tool", Name: call.Name, ToolCallID: call.ID, Status: "error", Content: rv.Text,
		ResponseMetadata: &reviewMeta{Review: rv.Type}}
	if rv.Type == ReviewIgnore {
		w.Content = ignoredText
	}
	b, _ := json.Marshal(w) // strings always marshal
	return b
}

// reviewMeta is a reviewed tool message's response_metadata.
type reviewMeta struct {
	Review string `json:"review,omitempty"`
}

// editedReply is the last reply with the arguments of its tool calls as
// calls has them (after the person's edits), its other fields kept.
func editedReply(d state.Doc, calls []agent.ToolCall) (json.RawMessage, error) {
	n, _ := d.ListLen(MessagesField)
	raw, _ := d.Element(MessagesField, n-1)
	var msg map[string]json.RawMessage
	var tcs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &msg); err != nil {
		return nil, fmt.Errorf("agentfile: the reply under review: %w", err)
	}
	if err := json.Unmarshal(msg["tool_calls"], &tcs); err != nil || len(tcs) != len(calls) {
		return nil, fmt.Errorf("agentfile: the tool calls of the reply under review: %v", err)
	}
	for i := range tcs {
		tcs[i]["args"] = calls[i].Args
	}
	var err error
	if msg["tool_calls"], err = json.Marshal(tcs); err != nil {
		return nil, err
	}
	return json.Marshal(msg)
}

// afterTools ends the turn when the person ignored a call of the round
// (no further model call), else goes back to agent.
func (c *chat) afterTools(ctx context.Context, d state.Doc) ([]flow.Target, error) {
	n, _ := d.ListLen(MessagesField)
	for i := n - 1; i >= 0; i-- {
		raw, _ := d.Element(MessagesField, i)
		var m storedMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("agentfile: message %d: %w", i, err)
		}
		if m.kind() != "tool" {
			break
		}
		if m.ResponseMetadata.Review == ReviewIgnore {
			return flow.To(flow.END), nil
		}
	}
	return flow.To(ChatAgentNode), nil
}
