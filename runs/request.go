package runs

// A run request as clients send it (the body of every run-creating
// endpoint) and the shapes it carries.

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/flow"
)

// Command is a run's command (LangGraph's Command): resume a pause with a
// value, or goto "__end__".
type Command struct {
	Resume json.RawMessage `json:"resume"`
	Update json.RawMessage `json:"update"`
	Goto   json.RawMessage `json:"goto"`
}

// RunConfig is a run's config as clients send it (LangGraph's
// RunnableConfig): configurable reaches the run's nodes
// (flow.RunConfigOf); metadata and tags are kept with the run.
type RunConfig struct {
	Tags           []string       `json:"tags"`
	Metadata       map[string]any `json:"metadata,omitempty"`
	RecursionLimit int            `json:"recursion_limit"`
	Configurable   map[string]any `json:"configurable"`
	RunName        string         `json:"run_name"`
	MaxConcurrency int            `json:"max_concurrency"`
}

// Request is the body of every run-creating endpoint.
type Request struct {
	AssistantID       string            `json:"assistant_id"`
	Input             json.RawMessage   `json:"input"`
	Command           *Command          `json:"command"`
	Config            *RunConfig        `json:"config"`
	Context           json.RawMessage   `json:"context"`
	Metadata          map[string]any    `json:"metadata"`
	StreamMode        StringList        `json:"stream_mode"`
	StreamSubgraphs   bool              `json:"stream_subgraphs"`
	StreamResumable   bool              `json:"stream_resumable"`
	FeedbackKeys      json.RawMessage   `json:"feedback_keys"`
	InterruptBefore   StringList        `json:"interrupt_before"`
	InterruptAfter    StringList        `json:"interrupt_after"`
	Checkpoint        *CheckpointConfig `json:"checkpoint"`
	CheckpointID      string            `json:"checkpoint_id"`
	Webhook           json.RawMessage   `json:"webhook"`
	MultitaskStrategy string            `json:"multitask_strategy"`
	OnCompletion      string            `json:"on_completion"`
	OnDisconnect      string            `json:"on_disconnect"`
	AfterSeconds      *float64          `json:"after_seconds"`
	IfNotExists       string            `json:"if_not_exists"`
	CheckpointDuring  *bool             `json:"checkpoint_during"`
	Durability        string            `json:"durability"`
	StrictResume      *bool             `json:"strict_resume"`
	LangsmithTracer   json.RawMessage   `json:"langsmith_tracer"`
	// approval: set by the answer endpoint, never by a client's body.
	approval *flow.Approval
	// Deliver: the caller answers with the run's outcome (a stream or a
	// wait), so a stateless run's thread is kept until it has (Run.Deliver).
	Deliver bool `json:"-"`
	// runID names the run (a cron's tick: made again, it is found);
	// temporary makes the run's thread one deleted when it ends (a
	// stateless cron's, named by the tick).
	runID     string
	temporary bool
}

// CheckpointConfig names a checkpoint as clients send it.
type CheckpointConfig struct {
	ThreadID      string         `json:"thread_id"`
	CheckpointNS  string         `json:"checkpoint_ns"`
	CheckpointID  string         `json:"checkpoint_id"`
	CheckpointMap map[string]any `json:"checkpoint_map"`
}

// StringList is a JSON string or array of strings (stream_mode,
// interrupt_before accept both).
type StringList []string

func (l *StringList) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*l = StringList{s}
		return nil
	}
	var ss []string
	if err := json.Unmarshal(b, &ss); err != nil {
		return errors.New("want a string or an array of strings")
	}
	*l = ss
	return nil
}

// Unsupported refuses API fields Cairn does not implement when a request
// sets them, rather than ignore them silently.
func Unsupported(fields map[string]json.RawMessage) error {
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if v := strings.TrimSpace(string(fields[k])); v != "" && v != "null" {
			return invalid("$."+k, "%s is not supported by Cairn", k)
		}
	}
	return nil
}
