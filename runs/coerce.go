package runs

import (
	"github.com/cairn-dev/cairn/state"
)

// roleTypes are the message types roles name (LangChain's and OpenAI's),
// as LangChain coerces them.
var roleTypes = map[string]string{"human": "human", "user": "human", "ai": "ai", "assistant": "ai", "system": "system", "developer": "system", "tool": "tool"}

// coerceMessages gives the messages an update from the API writes to a Go
// graph's messages fields (state.ReducerMessages) the shape LangGraph's
// reducer gives message-likes: a string is a human message, and a role
// (human or user, ai or assistant, system, developer, tool) names the
// type. Anything
// else is left for the reducer to take or refuse.
func coerceMessages(s *state.Schema, upd state.Update) {
	for k, v := range upd {
		if s.Reducer(k) != state.ReducerMessages {
			continue
		}
		switch x := v.(type) {
		case []any:
			for i, e := range x {
				x[i] = coerceMessage(e)
			}
		default:
			upd[k] = coerceMessage(x)
		}
	}
}

// coerceMessage is one message-like in LangGraph's shape.
func coerceMessage(e any) any {
	switch m := e.(type) {
	case string:
		return map[string]any{"type": "human", "content": m}
	case map[string]any:
		if _, typed := m["type"]; typed {
			return m
		}
		if role, ok := m["role"].(string); ok {
			if t, ok := roleTypes[role]; ok {
				m["type"] = t
				delete(m, "role")
			}
		}
	}
	return e
}
