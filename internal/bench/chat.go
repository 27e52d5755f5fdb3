package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// ChatAssistantID is the id W3 and W4 serve their chat graph under.
const ChatAssistantID = "chat"

// answerBytes is the size an answer is padded to.
const answerBytes = 200

// TurnText is the human message of W3's turn i (1-based).
func TurnText(i int) string {
	return "turn " + strconv.Itoa(i) + ": hello, how are you today?"
}

// Answer is the chat assistant's answer to a human message: "You said:
// <text>. " right-padded with x to 200 bytes (longer texts are not cut).
func Answer(text string) string {
	s := "You said: " + text + ". "
	if len(s) >= answerBytes {
		return s
	}
	return s + strings.Repeat("x", answerBytes-len(s))
}

// turnBody is the request body of W3's turn i for assistant.
func turnBody(assistant string, i int) []byte {
	b, _ := json.Marshal(map[string]any{ // a map of strings always marshals
		"assistant_id": assistant,
		"input":        map[string]any{"messages": []map[string]string{{"type": "human", "content": TurnText(i)}}},
	})
	return b
}

// ChatGraph is W3's chat assistant as a Go graph: one field, messages,
// under the messages (add_messages) reducer, and one node, agent, that
// answers the last human message with one AI message (Answer). No model
// is called: its cost is Cairn's own.
func ChatGraph() (*flow.Compiled, error) {
	schema, err := state.NewSchema(state.WithField("messages", state.ReducerMessages))
	if err != nil {
		return nil, err
	}
	return flow.NewGraph(schema).
		AddNode("agent", chatNode).
		AddEdge(flow.START, "agent").
		Compile()
}

// ChatAssistant is ChatGraph served as assistant "chat".
func ChatAssistant() (*runs.Graph, error) {
	g, err := ChatGraph()
	if err != nil {
		return nil, err
	}
	return &runs.Graph{ID: ChatAssistantID, Description: "W3's chat assistant: answers each human message (no model call)", Graph: g}, nil
}

// chatNode answers the newest human message; it reads messages from the
// end, so a turn costs the same at any depth.
func chatNode(_ context.Context, d state.Doc) (state.Update, error) {
	text, err := lastHuman(d)
	if err != nil {
		return nil, err
	}
	return state.Update{"messages": []state.Message{{Type: "ai", Content: Answer(text)}}}, nil
}

// lastHuman is the content of the newest human message of d.
func lastHuman(d state.Doc) (string, error) {
	n, _ := d.ListLen("messages")
	for i := n - 1; i >= 0; i-- {
		raw, _ := d.Element("messages", i)
		var m struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return "", fmt.Errorf("bench: chat: message %d: %w", i, err)
		}
		if m.Type != "human" && m.Role != "user" && m.Role != "human" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			s = string(m.Content) // content blocks: answered as their JSON
		}
		return s, nil
	}
	return "", fmt.Errorf("bench: chat: no human message to answer")
}

// ChatFile is a chat agent file (kind: chat) served as W3's assistant,
// checked as cairn serve checks it; its id is the file's name.
func ChatFile(path string) (runs.Assistant, error) {
	a, err := runs.LoadAssistant(path, runs.AssistantConfig{})
	if err != nil {
		return nil, err
	}
	if a.Info().Kind != "chat" {
		return nil, fmt.Errorf("%w: %s is not a chat agent file (kind: chat): W3's turns add messages to a conversation", store.ErrInvalidArgument, path)
	}
	return a, nil
}

// checkOwn checks the configuration of the bench's own server: the
// assistant it serves (the Go graph, or the chat file's name).
func (cfg *W3Config) checkOwn() error {
	if cfg.PID != 0 {
		return fmt.Errorf("%w: a pid is for an external server (URL)", store.ErrInvalidArgument)
	}
	id := ChatAssistantID
	if cfg.AssistantFile != "" {
		abs, err := filepath.Abs(cfg.AssistantFile)
		if err != nil {
			return err
		}
		a, err := ChatFile(abs)
		if err != nil {
			return err
		}
		cfg.AssistantFile, id = abs, a.Info().ID
	}
	if cfg.Assistant != "" && cfg.Assistant != id {
		return fmt.Errorf("%w: the bench's own server serves assistant %q, not %q", store.ErrInvalidArgument, id, cfg.Assistant)
	}
	cfg.Assistant = id
	return nil
}
