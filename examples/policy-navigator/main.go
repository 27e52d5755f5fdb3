// Command policy-navigator is seed 003's multi-agent app on Cairn: an
// orchestrator routes each question by intent to one of four subgraphs,
// each with its own state type (interpretation, eligibility, benefits,
// advocacy); the answer comes back as a message through add_messages; a
// second question on the same thread remembers the first; a session log is
// saved after each turn.
//
//	go run ./examples/policy-navigator
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	_ "github.com/cairn-dev/cairn/store/inmem"
	_ "github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/sqlite"
	"github.com/cairn-dev/cairn/tracefile"
)

// AgentState is the orchestrator's state.
type AgentState struct {
	InputText         string          `json:"input_text"`
	CurrentIntent     *string         `json:"current_intent"`
	Messages          []state.Message `json:"messages" cairn:"messages"`
	InterpretedPolicy *string         `json:"interpreted_policy"`
	CitizenProfile    map[string]any  `json:"citizen_profile"`
	IsEligible        *bool           `json:"is_eligible"`
	EligibilityReason *string         `json:"eligibility_reason"`
	MatchedBenefits   []string        `json:"matched_benefits"`
	AdvocacyPlan      *string         `json:"advocacy_plan"`
}

// InterpretationState is the policy navigator subgraph's state.
type InterpretationState struct {
	InputText             string         `json:"input_text"`
	Intent                *string        `json:"intent"`
	RetrievedDocs         []string       `json:"retrieved_docs" cairn:"append"`
	AnalysisOutput        map[string]any `json:"analysis_output"`
	FinalMarkdownResponse *string        `json:"final_markdown_response"`
}

// EligibilityState is the eligibility verifier subgraph's state.
type EligibilityState struct {
	InputText             string         `json:"input_text"`
	Policy                string         `json:"policy"`
	CitizenProfile        map[string]any `json:"citizen_profile"`
	AnalysisOutput        map[string]any `json:"analysis_output"`
	FinalMarkdownResponse *string        `json:"final_markdown_response"`
}

// BenefitsState is the benefits matcher subgraph's state.
type BenefitsState struct {
	InputText             string         `json:"input_text"`
	CitizenProfile        map[string]any `json:"citizen_profile"`
	AnalysisOutput        map[string]any `json:"analysis_output"`
	FinalMarkdownResponse *string        `json:"final_markdown_response"`
}

// AdvocacyState is the advocacy agent subgraph's state.
type AdvocacyState struct {
	InputText             string         `json:"input_text"`
	SelectedScheme        *string        `json:"selected_scheme"`
	AnalysisOutput        map[string]any `json:"analysis_output"`
	FinalMarkdownResponse *string        `json:"final_markdown_response"`
}

// synthesize asks the model for the subgraph's answer.
func synthesize(model agent.Model, step string) flow.NodeFunc {
	return func(ctx context.Context, d state.Doc) (state.Update, error) {
		var in string
		_ = d.Get("input_text", &in)
		resp, err := model.Generate(ctx, agent.Request{Step: step, Messages: []agent.Message{{Role: agent.RoleUser, Content: in}}})
		flow.AddTokens(ctx, resp.Usage.Input, resp.Usage.Output)
		if err != nil {
			return nil, err
		}
		return state.Update{"final_markdown_response": resp.Message.Content}, nil
	}
}

func set(kv ...any) flow.NodeFunc {
	return func(context.Context, state.Doc) (state.Update, error) {
		u := state.Update{}
		for i := 0; i+1 < len(kv); i += 2 {
			u[kv[i].(string)] = kv[i+1]
		}
		return u, nil
	}
}

func subgraph[S any](model agent.Model, step string, nodes ...struct {
	name string
	fn   flow.NodeFunc
}) (*flow.Compiled, error) {
	typed, err := state.NewTyped[S]()
	if err != nil {
		return nil, err
	}
	g := flow.NewGraph(typed.Schema())
	var names []string
	for _, n := range nodes {
		g.AddNode(n.name, n.fn)
		names = append(names, n.name)
	}
	g.AddNode("synthesize", synthesize(model, step))
	return g.Chain(append(names, "synthesize")...).Compile()
}

type node = struct {
	name string
	fn   flow.NodeFunc
}

// specialists are the four subgraphs, each with its own state type.
type specialists struct{ policy, eligibility, benefits, advocacy *flow.Compiled }

// buildSpecialists compiles the subgraphs: each runs its own nodes, then
// synthesizes a Markdown answer with the model.
func buildSpecialists(model agent.Model) (sp specialists, err error) {
	if sp.policy, err = subgraph[InterpretationState](model, "policy",
		node{"intent", set("intent", "policy_explanation")},
		node{"rag", set("retrieved_docs", []string{"housing-policy.md#4", "rent-support-faq.md"})},
		node{"extract", set("analysis_output", map[string]any{"clause": "4", "topic": "rent support"})}); err != nil {
		return sp, err
	}
	if sp.eligibility, err = subgraph[EligibilityState](model, "eligibility",
		node{"profile", profile},
		node{"evaluate", set("analysis_output", map[string]any{"eligible": true, "rule": "senior and rent over 40% of income"})}); err != nil {
		return sp, err
	}
	if sp.benefits, err = subgraph[BenefitsState](model, "benefits", node{"match", set("analysis_output", map[string]any{"schemes": []string{"rent support", "senior transport pass"}})}); err != nil {
		return sp, err
	}
	sp.advocacy, err = subgraph[AdvocacyState](model, "advocacy", node{"select", set("selected_scheme", "rent support")})
	return sp, err
}

// profile reads the citizen's profile from the question.
func profile(ctx context.Context, d state.Doc) (state.Update, error) {
	var in string
	_ = d.Get("input_text", &in)
	p := map[string]any{}
	if strings.Contains(in, "67") {
		p["age"] = 67
	}
	return state.Update{"citizen_profile": p}, nil
}

// subgraphInput is what a subgraph gets of the main state: only
// input_text, and, with withPolicy, the policy interpreted earlier in the
// thread (the eligibility check uses it).
func subgraphInput(withPolicy bool) func(ctx context.Context, d state.Doc) (state.Update, error) {
	return func(ctx context.Context, d state.Doc) (state.Update, error) {
		var s AgentState
		if err := d.Get("input_text", &s.InputText); err != nil {
			return nil, err
		}
		u := state.Update{"input_text": s.InputText}
		if withPolicy && d.Has("interpreted_policy") {
			var p *string
			_ = d.Get("interpreted_policy", &p)
			if p != nil {
				u["policy"] = *p
			}
		}
		return u, nil
	}
}

// subgraphOutput maps a subgraph's answer back into the main state: the
// answer as a message, and the field the specialist fills.
func subgraphOutput(field string) func(ctx context.Context, d state.Doc) (state.Update, error) {
	return func(ctx context.Context, d state.Doc) (state.Update, error) {
		var resp string
		if err := d.Get("final_markdown_response", &resp); err != nil {
			return nil, err
		}
		u := state.Update{"messages": state.Message{Role: "assistant", Content: resp}}
		switch field {
		case "interpreted_policy", "advocacy_plan":
			u[field] = resp
		case "eligibility":
			u["is_eligible"], u["eligibility_reason"] = true, resp
		case "benefits":
			u["matched_benefits"] = []string{"rent support", "senior transport pass"}
		}
		return u, nil
	}
}

// classify is the orchestrator's intent classifier.
func classify(ctx context.Context, d state.Doc) (state.Update, error) {
	var text string
	_ = d.Get("input_text", &text)
	t := strings.ToLower(text)
	intent := "POLICY_INTERPRETER"
	switch {
	case strings.Contains(t, "eligible"):
		intent = "ELIGIBILITY_VERIFIER"
	case strings.Contains(t, "benefit"):
		intent = "BENEFITS_MATCHER"
	case strings.Contains(t, "appeal") || strings.Contains(t, "help me"):
		intent = "ADVOCACY_AGENT"
	}
	return state.Update{"current_intent": intent}, nil
}

// orchestrator builds the main graph: classify the intent, route to the
// matching specialist subgraph, end.
func orchestrator(model agent.Model) (*flow.Compiled, error) {
	sp, err := buildSpecialists(model)
	if err != nil {
		return nil, err
	}
	typed, err := state.NewTyped[AgentState]()
	if err != nil {
		return nil, err
	}
	routes := map[string]string{"POLICY_INTERPRETER": "policy", "ELIGIBILITY_VERIFIER": "eligibility", "BENEFITS_MATCHER": "benefits", "ADVOCACY_AGENT": "advocacy"}
	g := flow.NewGraph(typed.Schema()).
		AddNode("route", classify).
		AddNode("policy", flow.Subgraph(sp.policy, flow.SubgraphOptions{Input: subgraphInput(false), Output: subgraphOutput("interpreted_policy")})).
		AddNode("eligibility", flow.Subgraph(sp.eligibility, flow.SubgraphOptions{Input: subgraphInput(true), Output: subgraphOutput("eligibility")})).
		AddNode("benefits", flow.Subgraph(sp.benefits, flow.SubgraphOptions{Input: subgraphInput(false), Output: subgraphOutput("benefits")})).
		AddNode("advocacy", flow.Subgraph(sp.advocacy, flow.SubgraphOptions{Input: subgraphInput(false), Output: subgraphOutput("advocacy_plan")})).
		AddEdge(flow.START, "route").
		AddRouter("route", func(ctx context.Context, d state.Doc) ([]flow.Target, error) {
			var intent string
			if err := d.Get("current_intent", &intent); err != nil {
				return nil, err
			}
			return flow.To(routes[intent]), nil
		})
	for _, n := range routes {
		g.AddEdge(n, flow.END)
	}
	return g.Compile()
}

func main() {
	storeURL := flag.String("store", envOr("CAIRN_STORE", sqlite.DefaultURL), "store URL")
	script := flag.String("script", "examples/policy-navigator/replies.yaml", "scripted replies")
	logs := flag.String("logs", "logs", "session log directory")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *storeURL, *script, *logs); err != nil {
		fmt.Fprintln(os.Stderr, "policy-navigator:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, out io.Writer, storeURL, script, logs string) error {
	model, err := scripted.Load(script)
	if err != nil {
		return err
	}
	g, err := orchestrator(model)
	if err != nil {
		return err
	}
	s, err := store.Open(context.Background(), storeURL, store.OpenOptions{})
	if err != nil {
		return err
	}
	defer s.Close()
	r, err := flow.NewRunner(g, s, flow.Options{})
	if err != nil {
		return err
	}
	thread := "citizen-1"
	if _, err := s.Thread(ctx, thread); err == nil {
		thread = fmt.Sprintf("citizen-%d", os.Getpid())
	}
	for _, q := range []string{"What does the housing policy say about rent support?", "Am I eligible for it? I am 67."} {
		res, err := r.Invoke(ctx, thread, state.Update{"input_text": q, "messages": state.Message{Role: "user", Content: q}})
		if err != nil {
			return err
		}
		var msgs []state.Message
		if err := res.State.Get("messages", &msgs); err != nil {
			return err
		}
		var intent string
		_ = res.State.Get("current_intent", &intent)
		fmt.Fprintf(out, "Q: %s\n  [%s] %s\n", q, intent, msgs[len(msgs)-1].Content)
		path, err := tracefile.ExportSessionLog(ctx, s, thread, logs, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  session log: %s (%d messages)\n", filepath.Base(path), len(msgs))
	}
	return nil
}
