package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The shapes below are those of the LangGraph Platform API as its SDKs
// read them (snake_case, times as RFC 3339 strings, ids as strings).

type apiAssistant struct {
	AssistantID string         `json:"assistant_id"`
	GraphID     string         `json:"graph_id"`
	Config      map[string]any `json:"config"`
	Context     map[string]any `json:"context"`
	CreatedAt   string         `json:"created_at"`
	UpdatedAt   string         `json:"updated_at"`
	Metadata    map[string]any `json:"metadata"`
	Version     int            `json:"version"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
}

type apiThread struct {
	ThreadID       string                    `json:"thread_id"`
	CreatedAt      string                    `json:"created_at"`
	UpdatedAt      string                    `json:"updated_at"`
	StateUpdatedAt string                    `json:"state_updated_at"`
	Metadata       map[string]any            `json:"metadata"`
	Status         string                    `json:"status"`
	Values         json.RawMessage           `json:"values"`
	Interrupts     map[string][]apiInterrupt `json:"interrupts"`
}

type apiInterrupt struct {
	ID    string          `json:"id"`
	Value json.RawMessage `json:"value"`
	When  string          `json:"when,omitempty"`
	NS    []string        `json:"ns,omitempty"`
}

type apiCheckpoint struct {
	ThreadID      string         `json:"thread_id"`
	CheckpointNS  string         `json:"checkpoint_ns"`
	CheckpointID  *string        `json:"checkpoint_id"`
	CheckpointMap map[string]any `json:"checkpoint_map"`
}

type apiState struct {
	Values           json.RawMessage `json:"values"`
	Next             []string        `json:"next"`
	Tasks            []apiTask       `json:"tasks"`
	Checkpoint       apiCheckpoint   `json:"checkpoint"`
	Metadata         map[string]any  `json:"metadata"`
	CreatedAt        *string         `json:"created_at"`
	ParentCheckpoint *apiCheckpoint  `json:"parent_checkpoint"`
	Interrupts       []apiInterrupt  `json:"interrupts"`
}

type apiTask struct {
	ID         string         `json:"id"`
	Name       string         `json:"name"`
	Error      *string        `json:"error"`
	Interrupts []apiInterrupt `json:"interrupts"`
	Checkpoint *apiCheckpoint `json:"checkpoint"`
	State      *apiState      `json:"state"`
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
	Kwargs            runKwargs      `json:"kwargs"`
	CancelReason      *string        `json:"cancel_reason"`
	// Error is a failed run's error (redacted); Cairn's own field.
	Error string `json:"error,omitempty"`
}

// apiTime formats a time as the API does.
func apiTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}

// Checkpoint ids are UUIDs (version 8) that carry the checkpoint's seq in
// their last 48 bits, so they sort as the seqs do and need no lookup:
// seq 5 is 00000000-0000-8000-8000-000000000005.
const checkpointIDPrefix = "00000000-0000-8000-8000-"

func checkpointID(seq int64) string {
	return fmt.Sprintf("%s%012x", checkpointIDPrefix, seq)
}

// parseCheckpointID reads a checkpoint id back; a plain seq (as the CLI
// prints it) is accepted too.
func parseCheckpointID(s string) (int64, error) {
	if rest, ok := strings.CutPrefix(s, checkpointIDPrefix); ok && len(rest) == 12 {
		if n, err := strconv.ParseInt(rest, 16, 64); err == nil && n > 0 {
			return n, nil
		}
	} else if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		return n, nil
	}
	return 0, fmt.Errorf("checkpoint_id %q is not a Cairn checkpoint id (%s<12 hex digits> or a seq)", s, checkpointIDPrefix)
}

func checkpointRef(thread, ns string, seq int64) apiCheckpoint {
	c := apiCheckpoint{ThreadID: apiThreadID(thread), CheckpointNS: apiNamespace(ns)}
	if seq > 0 {
		id := checkpointID(seq)
		c.CheckpointID = &id
	}
	return c
}

// apiNamespace writes a Cairn namespace (nested with "/") as LangGraph's
// checkpoint_ns (nested with "|").
func apiNamespace(ns string) string { return strings.ReplaceAll(ns, "/", "|") }

// cairnNamespace reads a checkpoint_ns back.
func cairnNamespace(ns string) string { return strings.ReplaceAll(ns, "|", "/") }

// interruptID names the interrupt of a checkpoint.
func interruptID(thread, ns string, seq int64) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", thread, ns, seq))
	return hex.EncodeToString(sum[:16])
}
