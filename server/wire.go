package server

import (
	"encoding/json"

	"github.com/cairn-dev/cairn/runs"
)

// The shapes below are those of the LangGraph Platform API as its SDKs
// read them (snake_case, times as RFC 3339 strings, ids as strings).

type apiThread struct {
	ThreadID       string                      `json:"thread_id"`
	CreatedAt      string                      `json:"created_at"`
	UpdatedAt      string                      `json:"updated_at"`
	StateUpdatedAt string                      `json:"state_updated_at"`
	Metadata       map[string]any              `json:"metadata"`
	Status         string                      `json:"status"`
	Values         json.RawMessage             `json:"values"`
	Interrupts     map[string][]runs.Interrupt `json:"interrupts"`
}
