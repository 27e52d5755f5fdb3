package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"go.opentelemetry.io/otel/attribute"
)

// ToolContext is what a tool handler can reach.
type ToolContext struct {
	// KV is the run's key-value section; writes are committed with the step
	// that runs the tool.
	KV *state.KV
	// State is the state the step read.
	State state.Doc
	// Key is the call's idempotency key: the task's key, then
	// "/tool/<round>.<index>", round being the model call within the step
	// (from 0) and index the call's position in that reply (from 0). It
	// is the same when the step runs again after a crash, even though a
	// provider then gives its calls new ids. Use it to make side effects
	// happen once.
	Key string
}

// Tool is a function the model can call.
type Tool struct {
	Name        string
	Description string
	Params      *Schema // JSON Schema of the arguments
	Handler     func(ctx context.Context, tc ToolContext, args json.RawMessage) (any, error)
}

// Spec describes the tool to a model.
func (t Tool) Spec() ToolSpec {
	p := json.RawMessage(`{"type":"object"}`)
	if t.Params != nil {
		p = t.Params.JSON
	}
	return ToolSpec{Name: t.Name, Description: t.Description, Parameters: p}
}

// NewTool builds a typed tool: its parameter schema comes from A, and the
// arguments are validated and decoded into A before fn runs.
func NewTool[A any](name, description string, fn func(ctx context.Context, tc ToolContext, args A) (any, error)) (Tool, error) {
	if name == "" || fn == nil {
		return Tool{}, fmt.Errorf("%w: a tool needs a name and a function", ErrUnknownTool)
	}
	schema, err := SchemaFor[A]()
	if err != nil {
		return Tool{}, err
	}
	schema.Name = name
	return Tool{Name: name, Description: description, Params: schema, Handler: func(ctx context.Context, tc ToolContext, raw json.RawMessage) (any, error) {
		var a A
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrToolArgs, err)
		}
		return fn(ctx, tc, a)
	}}, nil
}

// LoopOptions tune RunTools.
type LoopOptions struct {
	// MaxIterations caps the model calls (default 10).
	MaxIterations int
	// Context is handed to every tool; Key is extended with each call's
	// position (see ToolContext.Key).
	Context ToolContext
}

// LoopResult is what a tool loop produced.
type LoopResult struct {
	// Messages are the new messages in order: the assistant's, and a tool
	// message after each tool call.
	Messages    []Message
	Final       Message // the last assistant message
	ToolResults []ToolResult
	Responses   []Response
	Usage       Usage
}

// RunTools calls the model, runs the tools it asks for, sends back their
// results and repeats until the model answers without calling a tool or
// the iteration cap is hit (ErrToolLimit, with everything so far). A tool
// that fails, or is called with bad or unknown arguments, does not stop the
// loop: the error goes back to the model as the tool's result.
//
// Inside a node of a flow run that reads its thread's inbox
// (flow.Options.Inbox), the messages sent to the thread while the loop
// runs are added before its next model call (flow.TakeSteers), and to
// Messages in their place, so the node's update carries them; the step's
// checkpoint records them consumed.
//
// Inside a flow node, each model reply and each tool result is recorded in
// the step's journal as soon as it arrives (flow.Record): when the step
// runs again after a crash, the calls that completed are replayed from the
// store, not made again, and the loop goes on from the call the crash
// interrupted (which runs again, with the same ToolContext.Key).
func RunTools(ctx context.Context, m Model, req Request, tools []Tool, opts LoopOptions) (LoopResult, error) {
	maxIter := opts.MaxIterations
	if maxIter <= 0 {
		maxIter = 10
	}
	byName := make(map[string]Tool, len(tools))
	for _, t := range tools {
		byName[t.Name] = t
		req.Tools = append(req.Tools, t.Spec())
	}
	msgs := append([]Message(nil), req.Messages...)
	j := newToolJournal(msgs)
	var res LoopResult
	for i := 0; i < maxIter; i++ {
		if i > 0 { // before each model call after the first: the first's request is the caller's
			steered, err := j.steers(ctx, i)
			if err != nil {
				return res, err
			}
			res.Messages = append(res.Messages, steered...)
			msgs = append(msgs, steered...)
		}
		req.Messages = msgs
		resp, err := j.generate(ctx, m, req, i)
		res.Usage = res.Usage.Add(resp.Usage)
		flow.AddTokens(ctx, resp.Usage.Input, resp.Usage.Output) // counts against a running flow's budget
		if err != nil {
			return res, err
		}
		res.Responses = append(res.Responses, resp)
		msg := resp.Message
		msg.Role = RoleAssistant
		res.Messages = append(res.Messages, msg)
		res.Final = msg
		msgs = append(msgs, msg)
		if len(msg.ToolCalls) == 0 {
			return res, nil
		}
		for k, call := range msg.ToolCalls {
			tr, err := j.runTool(ctx, byName, call, toolContext(opts.Context, i, k), i, k)
			if err != nil {
				return res, err
			}
			res.ToolResults = append(res.ToolResults, tr)
			content := string(tr.Output)
			if tr.Error != "" {
				content = "error: " + tr.Error
			}
			tm := Message{Role: RoleTool, ToolCallID: call.ID, Name: call.Name, Content: content}
			res.Messages = append(res.Messages, tm)
			msgs = append(msgs, tm)
		}
	}
	return res, fmt.Errorf("%w: %d model calls", ErrToolLimit, maxIter)
}

// toolContext is base with the key of the index-th call of model call
// round.
func toolContext(base ToolContext, round, index int) ToolContext {
	suffix := "tool/" + strconv.Itoa(round) + "." + strconv.Itoa(index)
	if base.Key != "" {
		base.Key += "/" + suffix
	} else {
		base.Key = suffix
	}
	return base
}

// runTool runs one call with tc (its key already set); failures become the
// result's error text.
func runTool(ctx context.Context, byName map[string]Tool, call ToolCall, tc ToolContext) (tr ToolResult) {
	tr = ToolResult{ID: call.ID, Name: call.Name}
	ctx, span := startSpan(ctx, "execute_tool "+call.Name, attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", call.Name), attribute.String("gen_ai.tool.call.id", call.ID))
	defer func() {
		var err error
		if tr.Error != "" {
			err = errors.New(tr.Error)
		}
		endSpan(span, err)
	}()
	t, ok := byName[call.Name]
	if !ok {
		tr.Error = fmt.Sprintf("%v %q", ErrUnknownTool, call.Name)
		return tr
	}
	args := call.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if t.Params != nil {
		if err := t.Params.Validate(args); err != nil {
			var se *SchemaError
			if errors.As(err, &se) {
				tr.Error = fmt.Sprintf("%v: %s", ErrToolArgs, se.Error())
			} else {
				tr.Error = fmt.Sprintf("%v: %v", ErrToolArgs, err)
			}
			return tr
		}
	}
	defer func() {
		if p := recover(); p != nil {
			tr.Output, tr.Error = nil, fmt.Sprintf("tool %q panicked: %v", call.Name, p)
		}
	}()
	out, err := t.Handler(ctx, tc, args)
	if err != nil {
		tr.Error = err.Error()
		return tr
	}
	b, err := json.Marshal(out)
	if err != nil {
		tr.Error = fmt.Sprintf("tool %q result cannot be encoded: %v", call.Name, err)
		return tr
	}
	tr.Output = b
	return tr
}
