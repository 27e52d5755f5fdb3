package agentfile

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/cairn-dev/cairn/state"
)

// newInput is a new run's first update and, for a chain, the head it
// must start from: a chain's fresh chain state (freshInput), a chat's new
// messages on the conversation its thread holds, wherever its head is. A
// chat's new message may come while the last run waits at a pause: the
// run starts from the message, and a tool call left without a result is
// answered "not run" to the model.
func (p *prepared) newInput(ctx context.Context, cfg RunConfig, ns string) (state.Update, *int64, error) {
	if !p.a.IsChat() {
		upd, seen, err := freshInput(ctx, cfg.Store, cfg.Thread, ns, p.a.Name, cfg.Input, cfg.Abandon)
		return upd, &seen, err
	}
	msgs, err := cfg.Input.chatMessages()
	if err != nil {
		return nil, nil, err
	}
	upd := state.Update{}
	if len(msgs) > 0 {
		upd[MessagesField] = msgs
	}
	return upd, nil, nil
}

// chatMessages are the messages a chat's input adds: text is one human
// message (none when empty), JSON is read by ChatMessages.
func (in Input) chatMessages() ([]json.RawMessage, error) {
	if in.Kind == "" || in.Kind == "text" {
		var s string
		if json.Unmarshal(in.Content, &s) != nil || s == "" {
			return nil, nil
		}
	}
	return ChatMessages(in.Content)
}

// finalOutput is a finished run's output: a chain's final_output, a
// chat's reply (its text as a JSON string).
func (p *prepared) finalOutput(d state.Doc) json.RawMessage {
	if p.a.IsChat() {
		return lastReply(d)
	}
	if fo, ok := d.Raw("final_output"); ok && string(fo) != "null" {
		return fo
	}
	return nil
}

// recursionLimit is the runner's step limit: none for a chain (a line,
// it cannot loop), flow's default for a chat (whose tool loop can).
func (p *prepared) recursionLimit() int {
	if p.a.IsChat() {
		return 0
	}
	return -1
}

// stateValues checks the values a state update writes: a chat's are its
// messages, read as its input's are (ChatMessages).
func (p *prepared) stateValues(values state.Update) (state.Update, error) {
	if !p.a.IsChat() {
		return values, nil
	}
	out := state.Update{}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		if k != MessagesField {
			return nil, chatErr("$."+k, "a chat's state has only messages")
		}
		raw, err := json.Marshal(values[k])
		if err != nil {
			return nil, chatErr("$."+k, "%v", err)
		}
		msgs, err := readMessages("$."+k, raw)
		if err != nil {
			return nil, err
		}
		out[k] = append([]json.RawMessage{}, msgs...)
	}
	return out, nil
}
