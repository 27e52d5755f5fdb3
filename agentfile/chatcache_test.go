package agentfile_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// recordingModel keeps the messages of every request it answers.
type recordingModel struct {
	m    agent.Model
	reqs [][]agent.Message
}

func (r *recordingModel) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	r.reqs = append(r.reqs, slices.Clone(req.Messages))
	return r.m.Generate(ctx, req)
}

const cacheScript = `replies:
  - user: notes
    tool_calls: [{name: read_file, args: {path: notes.txt}}]
  - user: notes
    echo_tool: true
  - user: notes
    tool_calls: [{name: read_file, args: {path: notes.txt}}]
  - echo_user: "You said: {user}."
    repeat: true
`

// chatSession plays one conversation on two threads taking turns (a tool
// call approved, one rejected, a message edited in place, one removed)
// and returns the requests the model got.
func chatSession(t *testing.T, a *agentfile.File, cache *agentfile.ConversationCache) [][]agent.Message {
	t.Helper()
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	var models []*recordingModel
	for range 2 {
		m, err := scripted.Parse("r.yaml", []byte(cacheScript))
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, &recordingModel{m: m})
	}
	cfg := func(i int) agentfile.RunConfig {
		return agentfile.RunConfig{Store: s, Thread: fmt.Sprint("t", i), Model: models[i], Conversations: cache}
	}
	run := func(i int, text string) {
		c := cfg(i)
		c.Input = agentfile.TextInput("inline", text)
		if _, err := agentfile.Run(ctx, a, c); err != nil {
			t.Fatal(err)
		}
	}
	resume := func(i int, action string) {
		c := cfg(i)
		c.Answer = flow.Approval{Action: action}
		if _, err := agentfile.Resume(ctx, a, c); err != nil {
			t.Fatal(err)
		}
	}
	// update writes msg with the id of the thread's first message.
	update := func(i int, msg map[string]any) {
		head, err := s.Load(ctx, store.LoadRequest{Thread: fmt.Sprint("t", i)})
		if err != nil {
			t.Fatal(err)
		}
		msg["id"] = messagesOf(t, head.State)[0].ID
		if _, err := agentfile.UpdateState(ctx, a, cfg(i), 0, state.Update{"messages": []any{msg}}, "agent"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		run(i, "hi")
	}
	for i := range 2 {
		run(i, "read my notes")
		resume(i, flow.ApprovalApprove)
		update(i, map[string]any{"type": "human", "content": "hello again"})
		run(i, "read the notes once more")
		resume(i, flow.ApprovalReject)
		run(i, "never mind")
		update(i, map[string]any{"type": "remove"})
		run(i, "bye")
	}
	return append(models[0].reqs, models[1].reqs...)
}

// TestConversationCache: a chat whose conversations are kept decoded
// between runs asks the model exactly what one that decodes each turn
// asks, through edits, removals, rejected calls and evictions.
func TestConversationCache(t *testing.T) {
	a := chatFile(t, "tools: [read_file]\ninterrupt_before: [tools]\n", cacheScript)
	plain := chatSession(t, a, nil)
	if len(plain) != 2*6 {
		t.Fatalf("%d model calls", len(plain))
	}
	if edited := plain[3]; edited[1].Content != "hello again" {
		t.Fatalf("the request after the edit: %+v", edited)
	}
	last := plain[5]
	if last[0].Role != agent.RoleSystem || last[1].Content != "You said: hi." || !slices.ContainsFunc(last, func(m agent.Message) bool { return m.Content == "error: the tool call was not run" }) {
		t.Fatalf("the last request of thread 0: %+v", last)
	}
	for _, size := range []int64{1 << 20, 600} { // roomy; one thread at most (evictions)
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			cached := chatSession(t, a, agentfile.NewConversationCache(size))
			if !reflect.DeepEqual(plain, cached) {
				for i := range plain {
					if !reflect.DeepEqual(plain[i], cached[i]) {
						t.Fatalf("request %d differs:\n%+v\n%+v", i, plain[i], cached[i])
					}
				}
				t.Fatal("the requests differ")
			}
		})
	}
}
