package replay_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/replay"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// steeredThread records thread t1 of a chat on SQLite, steered three
// ways: a message pending before the first run (taken at its first
// step), one sent while its model thinks (taken by its tool loop before
// the next model call) and a follow-up (taken by the second run's first
// step). It returns the store and the chat's path.
func steeredThread(t *testing.T) (store.Store, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	files := map[string]string{
		"chat.md":      "---\nname: chat\nkind: chat\nmodel: {provider: scripted, script: replies.yaml}\ntools: [read_file]\n---\n\n## Instructions\n\nHelp.\n",
		"replies.yaml": "replies:\n  - {tool_calls: [{name: read_file, args: {path: notes.txt}}], delay_ms: 400}\n  - {echo_user: \"You said: {user}\", repeat: true}\n",
		"notes.txt":    "the invoice is due on the 3rd\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := sqlite.OpenStore(ctx, filepath.Join(dir, "cairn.db"), sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ib, err := store.InboxOf(s)
	if err != nil {
		t.Fatal(err)
	}
	send := func(kind, text string) {
		msg, _ := json.Marshal(text)
		if _, err := ib.Append(ctx, "t1", 0, kind, msg); err != nil {
			t.Error(err)
		}
	}
	path := filepath.Join(dir, "chat.md")
	a := load(t, path)
	send(store.InboxSteer, "answer in French")
	go func() { time.Sleep(150 * time.Millisecond); send(store.InboxSteer, "also check the invoice date") }()
	if _, err := a.Run(ctx, runs.RunSpec{Store: s, Thread: "t1", Input: json.RawMessage(`"which files?"`)}); err != nil {
		t.Fatal(err)
	}
	send(store.InboxFollowUp, "then summarise")
	if _, err := a.Run(ctx, runs.RunSpec{Store: s, Thread: "t1", Input: json.RawMessage(`""`)}); err != nil {
		t.Fatal(err)
	}
	head, err := s.Load(ctx, store.LoadRequest{Thread: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []state.Message
	if err := head.State.Get("messages", &msgs); err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, m := range msgs {
		all = append(all, m.Type+":"+m.Content)
	}
	for _, want := range []string{"human:answer in French", "human:also check the invoice date", "human:then summarise", "ai:You said: then summarise"} {
		if !strings.Contains(strings.Join(all, "|"), want) {
			t.Fatalf("the recorded conversation lacks %q: %q", want, all)
		}
	}
	if head.Meta.Usage == nil || head.Meta.Usage.Inbox != 3 {
		t.Fatalf("the head consumed %+v, want all three entries", head.Meta.Usage)
	}
	return s, path
}

// TestReplaySteered: a thread steered before a run, inside a run's tool
// loop and by a follow-up replays to the same end, each message given at
// the step (and the model call) that took it; an edit of the prompt still
// departs at the first model call.
func TestReplaySteered(t *testing.T) {
	s, path := steeredThread(t)
	rep, err := replay.Thread(context.Background(), s, "t1", replay.Options{Assistant: load(t, path)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Matched || rep.Checkpoints < 4 || rep.Calls != 4 {
		t.Fatalf("report: %s", rep.MarshalIndent())
	}
	edit(t, path, "Help.", "Help briefly.")
	rep, err = replay.Thread(context.Background(), s, "t1", replay.Options{Assistant: load(t, path)})
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Departure; rep.Matched || d == nil || d.Call == nil || d.Call.Kind != "model" || d.Call.Index != 0 {
		t.Fatalf("report after the edit: %s", rep.MarshalIndent())
	}
}

// noter is a Go graph whose one node runs a tool loop (agent.RunTools):
// the model calls the tool "note", which sends a steer to the thread
// (store.Inbox), taken before the loop's next model call.
func noter(t *testing.T, ib *store.Inbox) *runs.Graph {
	t.Helper()
	m, err := scripted.Parse("noter", []byte("replies:\n  - tool_calls: [{name: note, args: {}}]\n  - text: done\n    repeat: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	note, err := agent.NewTool("note", "note", func(ctx context.Context, _ agent.ToolContext, _ struct{}) (any, error) {
		_, err := ib.Append(ctx, "t1", 0, store.InboxSteer, json.RawMessage(`"also check the date"`))
		return "noted", err
	})
	if err != nil {
		t.Fatal(err)
	}
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
	g, err := flow.NewGraph(schema).AddNode("loop", func(ctx context.Context, _ state.Doc) (state.Update, error) {
		res, err := agent.RunTools(ctx, m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "go"}}}, []agent.Tool{note}, agent.LoopOptions{})
		var out []state.Message
		for _, msg := range res.Messages {
			out = append(out, state.Message{Type: map[agent.Role]string{agent.RoleUser: "human", agent.RoleAssistant: "ai", agent.RoleTool: "tool"}[msg.Role], Content: msg.Content})
		}
		return state.Update{"messages": out}, err
	}).AddEdge(flow.START, "loop").AddEdge("loop", flow.END).Compile()
	if err != nil {
		t.Fatal(err)
	}
	return &runs.Graph{ID: "noter", Graph: g, Options: flow.Options{SteerInside: []string{"loop"}}}
}

// TestReplaySteeredToolLoop: a steer a tool loop took between two model
// calls of one step is given to the replay's loop at the same call, from
// the step's journal (the tool is not called, so nobody sends it again):
// the second model call's request matches.
func TestReplaySteeredToolLoop(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.OpenStore(ctx, filepath.Join(t.TempDir(), "cairn.db"), sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ib, err := store.InboxOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noter(t, ib).Run(ctx, runs.RunSpec{Store: s, Thread: "t1", Input: json.RawMessage(`{}`), Inbox: ib}); err != nil {
		t.Fatal(err)
	}
	head, err := s.Load(ctx, store.LoadRequest{Thread: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if head.Meta.Usage == nil || head.Meta.Usage.Inbox != 1 || !strings.Contains(string(head.State.AppendJSON(nil)), "also check the date") {
		t.Fatalf("recorded: %s %+v", head.State.AppendJSON(nil), head.Meta.Usage)
	}
	rep, err := replay.Thread(ctx, s, "t1", replay.Options{Assistant: noter(t, ib)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Matched || rep.Calls != 3 {
		t.Fatalf("report: %s", rep.MarshalIndent())
	}
	if last, _ := ib.Last(ctx, "t1"); last != 1 {
		t.Fatalf("the replay sent the steer again: the inbox's last entry is %d", last)
	}
}
