package server

import (
	"encoding/json"
	"time"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
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

type apiRun struct {
	RunID             string         `json:"run_id"`
	ThreadID          string         `json:"thread_id"`
	AssistantID       string         `json:"assistant_id"`
	CreatedAt         string         `json:"created_at"`
	UpdatedAt         string         `json:"updated_at"`
	Status            string         `json:"status"`
	Metadata          map[string]any `json:"metadata"`
	MultitaskStrategy string         `json:"multitask_strategy"`
	Kwargs            runs.Kwargs    `json:"kwargs"`
	CancelReason      *string        `json:"cancel_reason"`
	// Error is a failed run's error (redacted); Cairn's own field.
	Error string `json:"error,omitempty"`
}

// apiRunOf is a run record as the API shows it.
func apiRunOf(rec store.RunRecord) (apiRun, error) {
	d, err := runs.DataOf(rec)
	if err != nil {
		return apiRun{}, err
	}
	r := apiRun{RunID: rec.ID, ThreadID: runs.APIThreadID(rec.Thread), AssistantID: d.AssistantID, Status: rec.Status, Metadata: d.Metadata,
		MultitaskStrategy: d.MultitaskStrategy, Kwargs: d.Kwargs, CreatedAt: runs.APITime(time.Unix(0, rec.CreatedAt)), UpdatedAt: runs.APITime(time.Unix(0, rec.UpdatedAt))}
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	if d.CancelReason != "" {
		r.CancelReason = &d.CancelReason
	}
	r.Error = d.Error
	return r, nil
}
