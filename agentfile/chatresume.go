package agentfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// review is a person's answer to one tool call that waited: its type
// (ReviewAccept, …), the edited arguments, or the person's text.
type review struct {
	Type string          `json:"type"`
	Args json.RawMessage `json:"args,omitempty"`
	Text string          `json:"text,omitempty"`
}

// humanResponse is agent-inbox's answer to a HumanInterrupt.
type humanResponse struct {
	Type string          `json:"type"`
	Args json.RawMessage `json:"args"`
}

// readReviews reads a resume value into one review per waiting call:
// agent-inbox's HumanResponse list (a lone HumanResponse for one call),
// or a Cairn approval (flow.Approval: approve accepts every call; edit's
// value maps a call's id, or its tool's name when the tool is called once,
// to new arguments, the other calls accepted; reject with a reason
// answers every call with the reason, without one ignores them). Errors
// are *ChatInputError with a path from "$", the value's root.
func readReviews(raw json.RawMessage, calls []agent.ToolCall) ([]review, error) {
	raw = bytes.TrimSpace(raw)
	var probe map[string]json.RawMessage
	switch {
	case firstByteOf(raw) == '[':
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, chatErr("$", "%v", err)
		}
		if len(list) != len(calls) {
			return nil, chatErr("$", "%d answers for %d tool calls waiting for review (one HumanResponse a call, in order)", len(list), len(calls))
		}
		out := make([]review, len(list))
		for i, r := range list {
			rv, err := readResponse("$["+strconv.Itoa(i)+"]", r, calls[i])
			if err != nil {
				return nil, err
			}
			out[i] = rv
		}
		return out, nil
	case json.Unmarshal(raw, &probe) != nil:
		return nil, chatErr("$", "want {decisions: [{type: approve|edit|reject}, ...]} or a list of HumanResponse objects ({type: accept|edit|response|ignore, args}), one a waiting tool call")
	case probe["decisions"] != nil:
		return decisionReviews(probe["decisions"], calls)
	case probe["action"] != nil:
		var a flow.Approval
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, chatErr("$", "%v", err)
		}
		return approvalReviews(a, calls)
	case len(calls) != 1:
		return nil, chatErr("$", "one HumanResponse for %d tool calls waiting for review: send a list, one a call, in order", len(calls))
	}
	rv, err := readResponse("$", raw, calls[0])
	if err != nil {
		return nil, err
	}
	return []review{rv}, nil
}

// decisionReviews reads the decisions of LangChain's HITLResponse, one a
// waiting call, in order.
func decisionReviews(raw json.RawMessage, calls []agent.ToolCall) ([]review, error) {
	var list []json.RawMessage
	if firstByteOf(raw) != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, chatErr("$.decisions", "want a list of decisions ({type: approve|edit|reject}), one a waiting tool call")
	}
	if len(list) != len(calls) {
		return nil, chatErr("$.decisions", "%d decisions for %d tool calls waiting for review (one a call, in order)", len(list), len(calls))
	}
	out := make([]review, len(list))
	for i, r := range list {
		rv, err := readDecision("$.decisions["+strconv.Itoa(i)+"]", r, calls[i])
		if err != nil {
			return nil, err
		}
		out[i] = rv
	}
	return out, nil
}

// rejectedText is the tool message of a call rejected without a message.
const rejectedText = "the person rejected this tool call; it was not run"

// readDecision reads one decision for call: approve runs it, edit runs it
// with the edited action's arguments, reject answers it with the
// decision's message (which the model reads) instead of running it.
func readDecision(path string, raw json.RawMessage, call agent.ToolCall) (review, error) {
	var d struct {
		Type         string          `json:"type"`
		EditedAction json.RawMessage `json:"edited_action"`
		Message      string          `json:"message"`
	}
	if firstByteOf(raw) != '{' || json.Unmarshal(raw, &d) != nil {
		return review{}, chatErr(path, "want a decision {type: approve|edit|reject}")
	}
	switch d.Type {
	case DecisionApprove:
		return review{Type: ReviewAccept}, nil
	case DecisionEdit:
		return editedAction(path+".edited_action", d.EditedAction, call)
	case DecisionReject:
		if d.Message == "" {
			d.Message = rejectedText
		}
		return review{Type: ReviewResponse, Text: d.Message}, nil
	}
	return review{}, chatErr(path+".type", "%q: want approve, edit or reject", d.Type)
}

// editedAction reads an edit decision's action, {name, args}, for call's
// tool.
func editedAction(path string, raw json.RawMessage, call agent.ToolCall) (review, error) {
	var a struct {
		Name *string         `json:"name"`
		Args json.RawMessage `json:"args"`
	}
	if firstByteOf(raw) != '{' || json.Unmarshal(raw, &a) != nil {
		return review{}, chatErr(path, "want an action {name, args}")
	}
	return editOf(path, "name", a.Name, a.Args, call)
}

// readResponse reads one HumanResponse for call.
func readResponse(path string, raw json.RawMessage, call agent.ToolCall) (review, error) {
	var h humanResponse
	if err := json.Unmarshal(raw, &h); err != nil || firstByteOf(raw) != '{' {
		return review{}, chatErr(path, "want a HumanResponse object {type, args}")
	}
	switch h.Type {
	case ReviewAccept, ReviewIgnore:
		if !isJSONNull(h.Args) && h.Type == ReviewAccept {
			return editReview(path+".args", h.Args, call) // an accept with the (edited) action request
		}
		return review{Type: h.Type}, nil
	case ReviewEdit:
		return editReview(path+".args", h.Args, call)
	case ReviewResponse:
		var s string
		if json.Unmarshal(h.Args, &s) != nil {
			return review{}, chatErr(path+".args", "a response's args is the person's text (a string)")
		}
		return review{Type: ReviewResponse, Text: s}, nil
	}
	return review{}, chatErr(path+".type", "%q: want accept, edit, response or ignore", h.Type)
}

// editReview reads an edit's args, an action request for call's tool.
func editReview(path string, raw json.RawMessage, call agent.ToolCall) (review, error) {
	var ar struct {
		Action *string         `json:"action"`
		Args   json.RawMessage `json:"args"`
	}
	if firstByteOf(raw) != '{' || json.Unmarshal(raw, &ar) != nil {
		return review{}, chatErr(path, "want an action request {action, args}")
	}
	return editOf(path, "action", ar.Action, ar.Args, call)
}

// editOf is the review of an edit of call: the tool it names under key
// (nil: none) must be call's, and its arguments an object.
func editOf(path, key string, tool *string, args json.RawMessage, call agent.ToolCall) (review, error) {
	if tool != nil && *tool != call.Name {
		return review{}, chatErr(path+"."+key, "%q: the call is to tool %q (an edit changes its arguments, not its tool)", *tool, call.Name)
	}
	if firstByteOf(args) != '{' {
		return review{}, chatErr(path+".args", "a tool's arguments are an object")
	}
	return review{Type: ReviewEdit, Args: bytes.TrimSpace(args)}, nil
}

// approvalReviews maps a Cairn approval to the calls' reviews.
func approvalReviews(a flow.Approval, calls []agent.ToolCall) ([]review, error) {
	if err := a.Check(); err != nil {
		return nil, chatErr("$.action", "%v", err)
	}
	out := make([]review, len(calls))
	switch a.Action {
	case flow.ApprovalApprove:
		for i := range out {
			out[i] = review{Type: ReviewAccept}
		}
	case flow.ApprovalReject:
		if !isJSONNull(a.Value) {
			return nil, chatErr("$.value", "a rejection of tool calls has no value; its reason (if any) is what the model reads")
		}
		for i := range out {
			out[i] = review{Type: ReviewIgnore}
			if a.Reason != "" {
				out[i] = review{Type: ReviewResponse, Text: a.Reason}
			}
		}
	case flow.ApprovalEdit:
		return editReviews(a.Value, calls)
	}
	return out, nil
}

// editReviews maps an approval's edit value ({call id or tool name:
// arguments}) to the calls' reviews; the calls it does not name are
// accepted.
func editReviews(value json.RawMessage, calls []agent.ToolCall) ([]review, error) {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(value, &m) // Check made sure it is an object
	out := make([]review, len(calls))
	for i := range out {
		out[i] = review{Type: ReviewAccept}
	}
	for key, args := range m {
		i, err := callOf(key, calls)
		if err != nil {
			return nil, err
		}
		if firstByteOf(args) != '{' {
			return nil, chatErr("$.value."+key, "a tool's arguments are an object")
		}
		out[i] = review{Type: ReviewEdit, Args: bytes.TrimSpace(args)}
	}
	return out, nil
}

// callOf finds the call an edit names: by id, or by its tool's name when
// the tool is called once.
func callOf(key string, calls []agent.ToolCall) (int, error) {
	found := -1
	for i, c := range calls {
		if c.ID == key {
			return i, nil
		}
		if c.Name == key {
			if found >= 0 {
				return 0, chatErr("$.value."+key, "tool %q is called more than once: name the call by its id", key)
			}
			found = i
		}
	}
	if found < 0 {
		return 0, chatErr("$.value."+key, "no waiting tool call has this id or tool name")
	}
	return found, nil
}

func isJSONNull(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s == "" || s == "null"
}

// waitingCalls are the calls of the last reply that wait for review.
func (a *File) waitingCalls(d state.Doc) ([]agent.ToolCall, error) {
	calls, err := lastToolCalls(d)
	if err != nil {
		return nil, err
	}
	var out []agent.ToolCall
	for _, c := range calls {
		if a.ApproveTools.needs(c.Name) {
			out = append(out, c)
		}
	}
	return out, nil
}

// CheckResume checks the value a run resumes a chat's thread with, head
// its head: when the chat waits at node tools for the review of tool
// calls (approve_tools), the value must answer them (see KindChat). Any
// other pause takes any value. An error is a *ChatInputError whose path
// starts at the value's root ("$").
func (a *File) CheckResume(head store.Checkpoint, resume json.RawMessage) error {
	if !a.IsChat() || a.ApproveTools.none() || head.Status != store.StatusInterrupted {
		return nil
	}
	var p struct {
		Node  string          `json:"node"`
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(head.Meta.Interrupt, &p) != nil || p.Node != ChatToolsNode || p.Value == nil {
		return nil
	}
	calls, err := a.waitingCalls(head.State)
	if err != nil {
		return fmt.Errorf("agentfile: %w", err)
	}
	_, err = readReviews(resume, calls)
	return err
}
