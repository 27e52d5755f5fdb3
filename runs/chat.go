package runs

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/store"
)

// chatCacheBytes bounds the conversations a chat assistant keeps decoded
// between runs (agentfile.ConversationCache).
const chatCacheBytes = 64 << 20

// conversationsOf is the conversation cache of a chat agent file; nil for
// other files.
func conversationsOf(f *agentfile.File) *agentfile.ConversationCache {
	if !f.IsChat() {
		return nil
	}
	return agentfile.NewConversationCache(chatCacheBytes)
}

// chatInfo makes an agent file's description a chat's: kind chat, whose
// state is {messages}. With review (approve_tools), tools ends the turn
// when a person ignores a call, else goes back to agent.
func chatInfo(info *AssistantInfo, review bool) {
	info.Kind = agentfile.KindChat
	info.StateFields = []string{agentfile.MessagesField}
	info.Metadata["kind"] = agentfile.KindChat
	if !slices.Contains(info.Nodes, agentfile.ChatToolsNode) {
		return
	}
	// The router after agent chooses tools or the end, nothing else.
	info.Edges = []flow.Edge{{From: flow.START, To: agentfile.ChatAgentNode},
		{From: agentfile.ChatAgentNode, To: agentfile.ChatToolsNode, Conditional: true},
		{From: agentfile.ChatAgentNode, To: flow.END, Conditional: true},
		{From: agentfile.ChatToolsNode, To: agentfile.ChatAgentNode, Conditional: review}}
	if review {
		info.Edges = append(info.Edges, flow.Edge{From: agentfile.ChatToolsNode, To: flow.END, Conditional: true})
	}
}

// inputChecker is an assistant that checks a run's input when the run is
// asked for, so that bad input is a 422 naming its place, and nothing is
// stored.
type inputChecker interface {
	CheckInput(input json.RawMessage) error
}

// checkInput checks a new run's input with the assistant, if it checks.
func checkInput(a Assistant, input json.RawMessage) error {
	c, ok := a.(inputChecker)
	if !ok || IsNull(input) {
		return nil
	}
	return c.CheckInput(input)
}

// CheckInput implements inputChecker: a chat's input is messages
// (agentfile.ChatMessages); other agent files take any input.
func (a *agentAssistant) CheckInput(input json.RawMessage) error {
	if !a.f.IsChat() {
		return nil
	}
	_, err := agentfile.ChatMessages(input)
	return chatError("$.input", err)
}

// chatError makes a chat's input error a 422 at its place under root
// ("$.input", "$.values"); other errors pass as they are.
func chatError(root string, err error) error {
	var ce *agentfile.ChatInputError
	if !errors.As(err, &ce) {
		return err
	}
	return invalid(root+ce.Path[1:], "%s", ce.Msg)
}

// resumeChecker is an assistant that checks the value a run resumes a
// thread with against the thread's pause, so that an answer that does
// not fit is a 422 naming its place, and nothing is stored.
type resumeChecker interface {
	CheckResume(head store.Checkpoint, resume json.RawMessage) error
}

// checkResume checks a resume value (a command's resume, under root
// "$.command.resume", or an approval's body, under root "$") against the
// pause at the thread's head: its response_schema (a command's), and the
// assistant's own check, if it has one.
func (s *Service) checkResume(ctx context.Context, a Assistant, th store.Thread, root string, resume json.RawMessage) error {
	if th.Head == 0 {
		return nil
	}
	head, err := s.store.Load(ctx, store.LoadRequest{Thread: th.ID})
	if err != nil {
		return err
	}
	if root != "$" { // an approval's value is checked by Answer
		if err := checkAnswer(head, root, resume); err != nil {
			return err
		}
	}
	c, ok := a.(resumeChecker)
	if !ok {
		return nil
	}
	return chatError(root, c.CheckResume(head, resume))
}

// CheckResume implements resumeChecker: a chat waiting for the review of
// tool calls (approve_tools) takes decisions, HumanResponses or an approval
// (agentfile.File.CheckResume).
func (a *agentAssistant) CheckResume(head store.Checkpoint, resume json.RawMessage) error {
	return a.f.CheckResume(head, resume)
}

// emptyValues implements the empty state of a chat: no messages yet.
func (a *agentAssistant) emptyValues(string) json.RawMessage {
	if a.f.IsChat() {
		return json.RawMessage(`{"messages":[]}`)
	}
	return json.RawMessage("{}")
}
