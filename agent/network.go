package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"go.opentelemetry.io/otel/attribute"
)

// Agent is a model with a system prompt and tools.
type Agent struct {
	Name        string
	Description string
	System      string
	Model       Model
	Tools       []Tool
	Hooks       Hooks
}

// Prompt is what an agent is about to send; OnStart may change it.
type Prompt struct {
	System  string
	Input   string
	History []Message
}

// Hooks let an agent take part in its own lifecycle (AgentKit's
// lifecycle hooks).
type Hooks struct {
	// Enabled says whether the agent may be chosen now.
	Enabled func(ctx context.Context, n NetworkView) bool
	// OnStart runs before each model call; it may change the prompt, or stop
	// the agent's turn (stop true).
	OnStart func(ctx context.Context, n NetworkView, p *Prompt) (stop bool, err error)
	// OnResponse runs after each model call.
	OnResponse func(ctx context.Context, n NetworkView, r *InferenceResult) error
	// OnFinish runs when the agent's turn ends.
	OnFinish func(ctx context.Context, n NetworkView, r *InferenceResult) error
}

// NetworkView is the network's state as routers and hooks see it.
type NetworkView struct {
	Input     string
	Results   []InferenceResult
	KV        *state.KV
	CallCount int
	Stack     []string
}

// LastResult is the most recent inference result, or nil.
func (n NetworkView) LastResult() *InferenceResult {
	if len(n.Results) == 0 {
		return nil
	}
	return &n.Results[len(n.Results)-1]
}

// Router picks the next agents (run in order, as a stack); none stops the
// network.
type Router func(ctx context.Context, n NetworkView) ([]string, error)

// Network runs agents chosen by a router until it stops (AgentKit).
type Network struct {
	Name   string
	Agents []*Agent
	// Router is a code router; when nil, a routing agent using
	// DefaultModel picks agents through its select_agent and done tools.
	Router       Router
	DefaultModel Model
	// MaxIter caps agent turns per run (default 10).
	MaxIter int
	// MaxToolRounds caps model calls within one agent turn (default 10).
	MaxToolRounds int
}

// ErrNoAgents: no agent of the network is enabled.
var ErrNoAgents = errors.New("agent: no agents enabled in network")

// ErrUnknownAgent: the router chose an agent the network does not have.
var ErrUnknownAgent = errors.New("agent: unknown agent")

// State fields a network keeps.
const (
	FieldMessages = "messages" // shared message history (messages reducer)
	FieldResults  = "results"  // inference results (append)
	FieldInput    = "input"
	fieldNet      = "network" // routing state of the current run
)

// NetworkSchema is the state schema of networks: messages, results, kv,
// plus the routing state.
func NetworkSchema(extra ...state.SchemaOption) *state.Schema {
	opts := append([]state.SchemaOption{
		state.WithField(FieldMessages, state.ReducerMessages),
		state.WithField(FieldResults, state.ReducerAppend),
		state.WithField(state.KVField, state.ReducerMerge),
	}, extra...)
	return state.MustSchema(opts...)
}

// netState is the routing state, kept in the "network" field.
type netState struct {
	Stack     []string         `json:"stack"`
	Current   string           `json:"current,omitempty"`
	CallCount int              `json:"call_count"`
	Turn      *InferenceResult `json:"turn,omitempty"` // the current agent's turn so far
	Rounds    int              `json:"rounds"`
	Done      bool             `json:"done,omitempty"`
}

// Graph compiles the network into a flow graph: route → model ⇄ tools →
// route … Every model call and every round of tool calls is a committed
// step, so a crash never repeats a completed model call.
func (n *Network) Graph(schema *state.Schema) (*flow.Compiled, error) {
	if len(n.Agents) == 0 {
		return nil, fmt.Errorf("%w: network %q has no agents", ErrNoAgents, n.Name)
	}
	if n.Router == nil && n.DefaultModel == nil {
		return nil, fmt.Errorf("%w: network %q needs a router or a default model", flow.ErrInvalidGraph, n.Name)
	}
	seen := map[string]bool{}
	for _, a := range n.Agents {
		if a.Name == "" || a.Model == nil || seen[a.Name] {
			return nil, fmt.Errorf("%w: agent %q needs a unique name and a model", flow.ErrInvalidGraph, a.Name)
		}
		seen[a.Name] = true
	}
	if schema == nil {
		schema = NetworkSchema()
	}
	// A turn is a routing step and up to MaxToolRounds model calls, each
	// but the last followed by a tools step; the network's own step limit
	// lets MaxIter turns finish.
	maxIter, maxRounds := n.MaxIter, n.MaxToolRounds
	if maxIter <= 0 {
		maxIter = 10
	}
	if maxRounds <= 0 {
		maxRounds = 10
	}
	g := flow.NewGraph(schema).
		WithRecursionLimit(maxIter*(1+2*maxRounds)+1).
		AddNode("route", n.route).
		AddNode("model", n.callModel).
		AddNode("tools", n.runTools).
		AddEdge(flow.START, "route").
		AddRouter("route", func(ctx context.Context, d state.Doc) ([]flow.Target, error) {
			ns, err := readNet(d)
			if err != nil || ns.Done || ns.Current == "" {
				return nil, err
			}
			return flow.To("model"), nil
		}).
		AddRouter("model", func(ctx context.Context, d state.Doc) ([]flow.Target, error) {
			ns, err := readNet(d)
			if err != nil {
				return nil, err
			}
			if ns.Current == "" {
				return flow.To("route"), nil
			}
			return flow.To("tools"), nil
		}).
		AddEdge("tools", "model")
	return g.Compile()
}

// Input returns the update that starts a run of the network with input.
func Input(input string) state.Update {
	return state.Update{
		FieldInput:    input,
		fieldNet:      netState{Stack: []string{}},
		FieldMessages: Message{Role: RoleUser, Content: input},
	}
}

func readNet(d state.Doc) (netState, error) {
	var ns netState
	if !d.Has(fieldNet) {
		return ns, nil
	}
	if err := d.Get(fieldNet, &ns); err != nil {
		return ns, err
	}
	return ns, nil
}

func (n *Network) view(d state.Doc, ns netState) (NetworkView, error) {
	v := NetworkView{KV: state.NewKV(d), CallCount: ns.CallCount, Stack: slices.Clone(ns.Stack)}
	if d.Has(FieldInput) {
		if err := d.Get(FieldInput, &v.Input); err != nil {
			return v, err
		}
	}
	if d.Has(FieldResults) {
		if err := d.Get(FieldResults, &v.Results); err != nil {
			return v, err
		}
	}
	return v, nil
}

func (n *Network) agent(name string) *Agent {
	for _, a := range n.Agents {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// route picks the next agent: from the stack, else from the router.
func (n *Network) route(ctx context.Context, d state.Doc) (state.Update, error) {
	ns, err := readNet(d)
	if err != nil {
		return nil, err
	}
	maxIter := n.MaxIter
	if maxIter <= 0 {
		maxIter = 10
	}
	ns.Current, ns.Turn, ns.Rounds = "", nil, 0
	if ns.CallCount >= maxIter {
		ns.Done = true
		return state.Update{fieldNet: ns}, nil
	}
	view, err := n.view(d, ns)
	if err != nil {
		return nil, err
	}
	enabled := n.enabled(ctx, view)
	if len(enabled) == 0 {
		return nil, fmt.Errorf("%w %q", ErrNoAgents, n.Name)
	}
	upd := state.Update{}
	if len(ns.Stack) == 0 {
		var next []string
		if n.Router != nil {
			next, err = n.Router(ctx, view)
		} else {
			var usage Usage
			next, usage, err = n.routingAgent(ctx, view, enabled)
			flow.AddTokens(ctx, usage.Input, usage.Output)
		}
		if err != nil {
			return nil, err
		}
		if len(next) == 0 {
			ns.Done = true
			upd[fieldNet] = ns
			return withKV(upd, view), nil
		}
		ns.Stack = next
	}
	name := ns.Stack[0]
	ns.Stack = ns.Stack[1:]
	a := n.agent(name)
	if a == nil {
		return nil, fmt.Errorf("%w %q in network %q", ErrUnknownAgent, name, n.Name)
	}
	if !slices.Contains(enabled, name) {
		return nil, fmt.Errorf("%w: agent %q is not enabled", ErrNoAgents, name)
	}
	ns.Current = name
	ns.Turn = &InferenceResult{Agent: name, Input: view.Input}
	upd[fieldNet] = ns
	return withKV(upd, view), nil
}

// withKV adds what routers and hooks wrote to the view's key-value store
// to the step's update (AgentKit's network.state.kv is shared and
// writable by both), so it is committed with the step.
func withKV(upd state.Update, view NetworkView) state.Update {
	if kvu := view.KV.Update(); kvu != nil {
		upd[state.KVField] = kvu[state.KVField]
	}
	return upd
}

func (n *Network) enabled(ctx context.Context, v NetworkView) []string {
	var out []string
	for _, a := range n.Agents {
		if a.Hooks.Enabled == nil || a.Hooks.Enabled(ctx, v) {
			out = append(out, a.Name)
		}
	}
	return out
}

// routingAgent asks the default model to pick an agent with select_agent,
// or to finish with done.
func (n *Network) routingAgent(ctx context.Context, v NetworkView, enabled []string) ([]string, Usage, error) {
	var sb strings.Builder
	sb.WriteString("You route work to agents. Call select_agent with the name of the agent that should act next, or done when the task is complete.\nAgents:\n")
	for _, name := range enabled {
		a := n.agent(name)
		fmt.Fprintf(&sb, "- %s: %s\n", a.Name, a.Description)
	}
	msgs := []Message{{Role: RoleSystem, Content: sb.String()}, {Role: RoleUser, Content: v.Input}}
	if last := v.LastResult(); last != nil {
		for _, m := range last.Output {
			msgs = append(msgs, Message{Role: RoleUser, Content: fmt.Sprintf("%s said: %s", last.Agent, m.Content)})
		}
	}
	params, _ := SchemaFromJSON("select_agent", []byte(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`))
	req := Request{Messages: msgs, Step: "route", Tools: []ToolSpec{
		{Name: "select_agent", Description: "Pick the next agent", Parameters: params.JSON},
		{Name: "done", Description: "Finish: the task is complete", Parameters: json.RawMessage(`{"type":"object"}`)},
	}}
	resp, err := generateRecorded(ctx, n.DefaultModel, req, "router", "route")
	if err != nil {
		return nil, resp.Usage, err
	}
	for _, c := range resp.Message.ToolCalls {
		switch c.Name {
		case "done":
			return nil, resp.Usage, nil
		case "select_agent":
			var args struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(c.Args, &args); err != nil {
				return nil, resp.Usage, fmt.Errorf("%w: select_agent: %v", ErrToolArgs, err)
			}
			return []string{args.Name}, resp.Usage, nil
		}
	}
	// No tool call: the routing agent has nothing more to do.
	return nil, resp.Usage, nil
}

// callModel runs one model call of the current agent.
func (n *Network) callModel(ctx context.Context, d state.Doc) (_ state.Update, err error) {
	ns, err := readNet(d)
	if err != nil {
		return nil, err
	}
	a := n.agent(ns.Current)
	if a == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownAgent, ns.Current)
	}
	view, err := n.view(d, ns)
	if err != nil {
		return nil, err
	}
	ctx, span := startSpan(ctx, "invoke_agent "+a.Name, attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", a.Name))
	defer func() { endSpan(span, err) }()
	p, err := prompt(d, a, view)
	if err != nil {
		return nil, err
	}
	turn := ns.Turn
	if turn == nil {
		turn = &InferenceResult{Agent: a.Name, Input: view.Input}
	}
	if a.Hooks.OnStart != nil {
		stop, err := a.Hooks.OnStart(ctx, view, p)
		if err != nil {
			return nil, err
		}
		if stop {
			fin, err := n.finishTurn(ctx, a, view, ns, turn, nil)
			if err != nil {
				return nil, err
			}
			return withKV(fin, view), nil
		}
	}
	out, err := n.generate(ctx, a, p, turn)
	if err != nil {
		return nil, err
	}
	if a.Hooks.OnResponse != nil {
		if err := a.Hooks.OnResponse(ctx, view, turn); err != nil {
			return nil, err
		}
	}
	ns.Rounds++
	if len(out.ToolCalls) == 0 || ns.Rounds >= n.maxToolRounds() {
		fin, err := n.finishTurn(ctx, a, view, ns, turn, nil)
		if err != nil {
			return nil, err
		}
		fin[FieldMessages] = out
		return withKV(fin, view), nil
	}
	ns.Turn = turn
	return withKV(state.Update{FieldMessages: out, fieldNet: ns}, view), nil
}

// prompt is what the agent is asked: its system prompt, the network's
// input and the shared message history.
func prompt(d state.Doc, a *Agent, view NetworkView) (*Prompt, error) {
	var history []Message
	if d.Has(FieldMessages) {
		if err := d.Get(FieldMessages, &history); err != nil {
			return nil, err
		}
	}
	return &Prompt{System: a.System, Input: view.Input, History: history}, nil
}

// generate makes the model call and records it in the turn; the reply is
// returned as the agent's assistant message.
func (n *Network) generate(ctx context.Context, a *Agent, p *Prompt, turn *InferenceResult) (Message, error) {
	msgs := []Message{}
	if p.System != "" {
		msgs = append(msgs, Message{Role: RoleSystem, Content: p.System})
	}
	msgs = append(msgs, p.History...)
	if len(turn.Prompt) == 0 {
		// AgentKit's prompt: the whole initial message list of the turn.
		turn.Prompt = slices.Clone(msgs)
		turn.History = p.History
	}
	req := Request{Messages: msgs, Step: a.Name}
	for _, t := range a.Tools {
		req.Tools = append(req.Tools, t.Spec())
	}
	resp, err := generateRecorded(ctx, a.Model, req, a.Name, "model")
	flow.AddTokens(ctx, resp.Usage.Input, resp.Usage.Output)
	if err != nil {
		return Message{}, fmt.Errorf("agent %q: %w", a.Name, err)
	}
	out := resp.Message
	out.Role = RoleAssistant
	if out.Name == "" {
		out.Name = a.Name
	}
	turn.Output = append(turn.Output, out)
	turn.Raw = resp.Raw
	turn.Usage = turn.Usage.Add(resp.Usage)
	return out, nil
}

// maxToolRounds caps the tool rounds of one agent's turn (default 10).
func (n *Network) maxToolRounds() int {
	if n.MaxToolRounds <= 0 {
		return 10
	}
	return n.MaxToolRounds
}

// finishTurn records the agent's inference result and hands back to the
// router.
func (n *Network) finishTurn(ctx context.Context, a *Agent, view NetworkView, ns netState, turn *InferenceResult, upd state.Update) (state.Update, error) {
	if upd == nil {
		upd = state.Update{}
	}
	if a.Hooks.OnFinish != nil {
		if err := a.Hooks.OnFinish(ctx, view, turn); err != nil {
			return nil, err
		}
	}
	if turn.Output == nil {
		turn.Output = []Message{}
	}
	if turn.ToolCalls == nil {
		turn.ToolCalls = []ToolResult{}
	}
	ns.CallCount++
	ns.Current, ns.Turn, ns.Rounds = "", nil, 0
	upd[FieldResults] = []InferenceResult{*turn}
	upd[fieldNet] = ns
	return upd, nil
}

// runTools runs the tool calls of the current agent's last message.
func (n *Network) runTools(ctx context.Context, d state.Doc) (state.Update, error) {
	ns, err := readNet(d)
	if err != nil {
		return nil, err
	}
	a := n.agent(ns.Current)
	if a == nil || ns.Turn == nil || len(ns.Turn.Output) == 0 {
		return nil, fmt.Errorf("%w: no agent turn to run tools for", ErrUnknownAgent)
	}
	last := ns.Turn.Output[len(ns.Turn.Output)-1]
	byName := map[string]Tool{}
	for _, t := range a.Tools {
		byName[t.Name] = t
	}
	info, _ := flow.Info(ctx)
	kv := state.NewKV(d)
	tc := ToolContext{KV: kv, State: d, Key: info.Key}
	var msgs []Message
	round := max(ns.Rounds-1, 0)
	journal := newToolJournal([]Message{last}) // a crash mid-round replays the calls that completed
	for j, call := range last.ToolCalls {
		tr, err := journal.runTool(ctx, byName, call, toolContext(tc, round, j), round, j)
		if err != nil {
			return nil, err
		}
		ns.Turn.ToolCalls = append(ns.Turn.ToolCalls, tr)
		content := string(tr.Output)
		if tr.Error != "" {
			content = "error: " + tr.Error
		}
		msgs = append(msgs, Message{Role: RoleTool, ToolCallID: call.ID, Name: call.Name, Content: content})
	}
	upd := state.Update{FieldMessages: msgs, fieldNet: ns}
	if kvu := kv.Update(); kvu != nil {
		upd[state.KVField] = kvu[state.KVField]
	}
	return upd, nil
}
