package server

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
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
// state is {messages}.
func chatInfo(info *AssistantInfo) {
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
		{From: agentfile.ChatToolsNode, To: agentfile.ChatAgentNode}}
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
	if !ok || isNull(input) {
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
	return unprocessable(root+ce.Path[1:], "%s", ce.Msg)
}
