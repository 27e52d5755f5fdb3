package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// roundModel answers by the number of assistant turns already in the
// conversation, so it answers a replayed conversation as the first time:
// round 0 calls "note", round 1 calls "wait", round 2 ends. fail makes a
// round fail once.
type roundModel struct {
	mu    sync.Mutex
	calls []int
	fail  map[int]bool
}

func (m *roundModel) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	if err := ctx.Err(); err != nil {
		return agent.Response{}, err
	}
	round := 0
	for _, msg := range req.Messages {
		if msg.Role == agent.RoleAssistant {
			round++
		}
	}
	m.mu.Lock()
	m.calls = append(m.calls, round)
	fail := m.fail[round]
	delete(m.fail, round)
	m.mu.Unlock()
	if fail {
		return agent.Response{}, &agent.ProviderError{Provider: "test", Status: 400, Err: agent.ErrBadRequest, Message: "refused once"}
	}
	msg := agent.Message{Role: agent.RoleAssistant}
	switch round {
	case 0:
		msg.ToolCalls = []agent.ToolCall{{ID: "a", Name: "note", Args: json.RawMessage(`{"text":"password=hunter2hunter2"}`)}}
	case 1:
		msg.ToolCalls = []agent.ToolCall{{ID: "b", Name: "wait", Args: json.RawMessage(`{}`)}}
	default:
		msg.Content = "done"
	}
	return agent.Response{Message: msg, Usage: agent.Usage{Input: 10, Output: 1}}, nil
}

func (m *roundModel) rounds() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.calls...)
}

// journalGraph is one node running a tool loop with the tools note (which
// counts its calls and writes the key-value store) and wait (which blocks
// until block is closed the first time it is called, recording its keys).
type journalGraph struct {
	m     *roundModel
	mu    sync.Mutex
	notes int
	waits []string
	block chan struct{} // wait blocks on it while not nil
	first chan struct{} // closed when wait is first called
}

func (j *journalGraph) compile(t *testing.T) *flow.Compiled {
	t.Helper()
	note, err := agent.NewTool("note", "Notes the text", func(ctx context.Context, tc agent.ToolContext, a struct {
		Text string `json:"text"`
	}) (any, error) {
		j.mu.Lock()
		j.notes++
		j.mu.Unlock()
		return "noted " + a.Text, tc.KV.Set("noted", a.Text)
	})
	if err != nil {
		t.Fatal(err)
	}
	wait, err := agent.NewTool("wait", "Waits", func(ctx context.Context, tc agent.ToolContext, a struct{}) (any, error) {
		j.mu.Lock()
		j.waits = append(j.waits, tc.Key)
		block, first := j.block, j.first
		j.block, j.first = nil, nil
		j.mu.Unlock()
		if block != nil {
			close(first)
			<-ctx.Done() // the "crash": the run is cut off here
			return nil, ctx.Err()
		}
		return "waited", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	schema := state.MustSchema(state.WithField("out", state.ReducerReplace), state.WithField(state.KVField, state.ReducerMerge))
	g, err := flow.NewGraph(schema).AddNode("loop", func(ctx context.Context, d state.Doc) (state.Update, error) {
		info, _ := flow.Info(ctx)
		kv := state.NewKV(d)
		res, err := agent.RunTools(ctx, j.m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "go"}}},
			[]agent.Tool{note, wait}, agent.LoopOptions{Context: agent.ToolContext{KV: kv, State: d, Key: info.Key}})
		if err != nil {
			return nil, err
		}
		upd := state.Update{"out": res.Final.Content}
		if kvu := kv.Update(); kvu != nil {
			upd[state.KVField] = kvu[state.KVField]
		}
		return upd, nil
	}).AddEdge(flow.START, "loop").AddEdge("loop", flow.END).Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestToolLoopReplaysAfterCrash: a step cut off in its second tool call
// (here by cancelling its run, which commits nothing, as a crash would)
// runs again without repeating the model calls and the tool call that
// completed: they come from the step's journal, the key-value write of the
// replayed call included; the call that was cut off runs again with the
// same key. The journal holds redacted entries only.
func TestToolLoopReplaysAfterCrash(t *testing.T) {
	j := &journalGraph{m: &roundModel{}, block: make(chan struct{}), first: make(chan struct{})}
	first := j.first
	s := inmem.Open(store.Options{})
	r, err := flow.NewRunner(j.compile(t), s, flow.Options{Redact: redact.Default()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-first; cancel() }()
	if _, err := r.Invoke(ctx, "t", state.Update{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("first attempt: %v", err)
	}
	if got := j.m.rounds(); len(got) != 2 || j.notes != 1 {
		t.Fatalf("first attempt: model rounds %v, note calls %d", got, j.notes)
	}
	res, err := r.Resume(context.Background(), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := j.m.rounds(); len(got) != 3 || got[2] != 2 {
		t.Fatalf("model rounds %v: want 0, 1, then only round 2 after the crash", got)
	}
	if j.notes != 1 {
		t.Fatalf("note ran %d times: a completed call ran again", j.notes)
	}
	if len(j.waits) != 2 || j.waits[0] != j.waits[1] || !strings.HasSuffix(j.waits[0], "/loop/tool/1.0") {
		t.Fatalf("wait keys %v: want the same key twice", j.waits)
	}
	var kv map[string]string
	if err := res.State.Get(state.KVField, &kv); err != nil || kv["noted"] != "[REDACTED]" && !strings.Contains(kv["noted"], "REDACTED") {
		t.Fatalf("kv %v (%v): the replayed call's write is missing", kv, err)
	}
	head, err := s.Load(context.Background(), store.LoadRequest{Thread: "t"})
	if err != nil || head.Meta.Usage == nil || head.Meta.Usage.Tokens.Input != 30 {
		t.Fatalf("usage %+v (%v): want the three model calls counted once", head.Meta.Usage, err)
	}
	ws, err := s.Writes(context.Background(), "t", "", 1)
	if err != nil || len(ws) < 3 {
		t.Fatalf("journal %v, %v", ws, err)
	}
	for _, w := range ws {
		if strings.Contains(string(w.Update), "hunter2hunter2") {
			t.Fatalf("journal entry %s holds a secret: %s", w.Task, w.Update)
		}
	}
}

// TestToolLoopAfterFailureRunsAfresh: a step that failed (a FAILED
// checkpoint) is tried again from its start when resumed — its journal
// belongs to the failed attempt — as is every step under async
// durability, which keeps no journal.
func TestToolLoopAfterFailureRunsAfresh(t *testing.T) {
	for _, d := range []flow.Durability{flow.DurabilitySync, flow.DurabilityAsync} {
		t.Run(string(d), func(t *testing.T) {
			j := &journalGraph{m: &roundModel{fail: map[int]bool{2: true}}}
			r, err := flow.NewRunner(j.compile(t), inmem.Open(store.Options{}), flow.Options{Durability: d})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Invoke(context.Background(), "t", state.Update{}); !errors.Is(err, agent.ErrBadRequest) {
				t.Fatalf("first attempt: %v", err)
			}
			res, err := r.Resume(context.Background(), "t", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := j.m.rounds(); len(got) != 6 || j.notes != 2 {
				t.Fatalf("model rounds %v, note calls %d: want the step run twice from its start", got, j.notes)
			}
			if out, _ := res.State.Raw("out"); string(out) != `"done"` {
				t.Fatalf("out %s", out)
			}
		})
	}
}
