package flow_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestSubgraphs is seed 003's pattern: an orchestrator routes by intent to
// subgraphs with their own state types; the answer comes back as a message;
// a second invocation on the same thread remembers the first.
func TestSubgraphs(t *testing.T) {
	s := inmem.Open(store.Options{})
	var retrieveRuns, synthRuns atomic.Int32
	failSynthOnce := atomic.Bool{}

	policySchema := state.MustSchema(state.WithField("retrieved_docs", state.ReducerAppend))
	policy := mustCompile(t, flow.NewGraph(policySchema).
		AddNode("intent", func(ctx context.Context, d state.Doc) (state.Update, error) {
			return state.Update{"intent": "policy_explanation"}, nil
		}).
		AddNode("retrieve", func(ctx context.Context, d state.Doc) (state.Update, error) {
			retrieveRuns.Add(1)
			return state.Update{"retrieved_docs": []string{"doc-1", "doc-2"}}, nil
		}).
		AddNode("synthesize", func(ctx context.Context, d state.Doc) (state.Update, error) {
			synthRuns.Add(1)
			if failSynthOnce.CompareAndSwap(true, false) {
				return nil, errors.New("model overloaded")
			}
			var in string
			_ = d.Get("input_text", &in)
			var docs []string
			_ = d.Get("retrieved_docs", &docs)
			return state.Update{"final_markdown_response": "Policy answer to " + in + " from " + strings.Join(docs, "+")}, nil
		}).
		Chain("intent", "retrieve", "synthesize"))

	eligibility := mustCompile(t, flow.NewGraph(nil).
		AddNode("profile", func(ctx context.Context, d state.Doc) (state.Update, error) {
			var answer string
			if err := flow.Interrupt(ctx, "What is your age?", &answer); err != nil {
				return nil, err
			}
			return state.Update{"citizen_profile": map[string]string{"age": answer}}, nil
		}).
		AddNode("evaluate", func(ctx context.Context, d state.Doc) (state.Update, error) {
			var p map[string]string
			_ = d.Get("citizen_profile", &p)
			return state.Update{"final_markdown_response": "Eligible at age " + p["age"]}, nil
		}).
		Chain("profile", "evaluate"))

	in := func(ctx context.Context, parent state.Doc) (state.Update, error) {
		var text string
		err := parent.Get("input_text", &text)
		return state.Update{"input_text": text}, err
	}
	out := func(ctx context.Context, child state.Doc) (state.Update, error) {
		var resp string
		err := child.Get("final_markdown_response", &resp)
		return state.Update{"messages": state.Message{Role: "assistant", Content: resp}}, err
	}
	main := flow.NewGraph(state.MustSchema(state.WithField("messages", state.ReducerMessages))).
		AddNode("route", func(ctx context.Context, d state.Doc) (state.Update, error) {
			var text string
			_ = d.Get("input_text", &text)
			intent := "POLICY_INTERPRETER"
			if strings.Contains(text, "eligible") {
				intent = "ELIGIBILITY_VERIFIER"
			}
			return state.Update{"current_intent": intent}, nil
		}).
		AddNode("policy", flow.Subgraph(policy, flow.SubgraphOptions{Input: in, Output: out})).
		AddNode("eligibility", flow.Subgraph(eligibility, flow.SubgraphOptions{Input: in, Output: out})).
		AddEdge(flow.START, "route").
		AddRouter("route", func(ctx context.Context, d state.Doc) ([]flow.Target, error) {
			var intent string
			_ = d.Get("current_intent", &intent)
			if intent == "ELIGIBILITY_VERIFIER" {
				return flow.To("eligibility"), nil
			}
			return flow.To("policy"), nil
		}).
		AddEdge("policy", flow.END).AddEdge("eligibility", flow.END)
	r := newRunner(t, main, s, flow.Options{})
	ctx := context.Background()

	// First turn; the child fails once after retrieving: the parent step
	// fails, and resuming does not retrieve again.
	failSynthOnce.Store(true)
	_, err := r.Invoke(ctx, "chat", state.Update{"input_text": "what does clause 4 mean?", "messages": state.Message{Role: "user", Content: "what does clause 4 mean?"}})
	if !errors.Is(err, flow.ErrNodeFailed) || !strings.Contains(err.Error(), "model overloaded") {
		t.Fatalf("first turn: %v", err)
	}
	res, err := r.Resume(ctx, "chat", nil)
	if err != nil {
		t.Fatal(err)
	}
	if retrieveRuns.Load() != 1 || synthRuns.Load() != 2 {
		t.Fatalf("retrieve ran %d times, synthesize %d", retrieveRuns.Load(), synthRuns.Load())
	}
	var msgs []state.Message
	if err := res.State.Get("messages", &msgs); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[1].Content != "Policy answer to what does clause 4 mean? from doc-1+doc-2" {
		t.Fatalf("messages %+v", msgs)
	}
	// The subgraph's checkpoints live in their own namespace of the thread,
	// with the child's own state type.
	child, err := s.Load(ctx, store.LoadRequest{Thread: "chat", Namespace: "policy:2"})
	if err != nil || !child.State.Has("retrieved_docs") || child.State.Has("messages") {
		t.Fatalf("child namespace: %s, %v", child.State, err)
	}

	// Second turn on the same thread: routed to the other subgraph, which
	// interrupts; the answer flows down to the child and back.
	res, err = r.Invoke(ctx, "chat", state.Update{"input_text": "am I eligible?", "messages": state.Message{Role: "user", Content: "am I eligible?"}})
	if err != nil || res.StopReason != state.StopInterrupt || string(res.Interrupt) != `"What is your age?"` {
		t.Fatalf("second turn: %+v %v", res, err)
	}
	res, err = r.Resume(ctx, "chat", "67")
	if err != nil || res.StopReason != state.StopSuccess {
		t.Fatalf("resume: %+v %v", res, err)
	}
	msgs = nil
	if err := res.State.Get("messages", &msgs); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 || msgs[3].Content != "Eligible at age 67" || msgs[0].Content != "what does clause 4 mean?" {
		t.Fatalf("messages after second turn %+v", msgs)
	}
}
