package runs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/store"
)

type Interrupt struct {
	ID    string          `json:"id"`
	Value json.RawMessage `json:"value"`
	When  string          `json:"when,omitempty"`
	NS    []string        `json:"ns,omitempty"`
	// ResponseSchema is the JSON Schema of the answer the interrupt
	// expects (flow.WithResponseSchema), omitted for any.
	ResponseSchema json.RawMessage `json:"response_schema,omitempty"`
}

type CheckpointRef struct {
	ThreadID      string         `json:"thread_id"`
	CheckpointNS  string         `json:"checkpoint_ns"`
	CheckpointID  *string        `json:"checkpoint_id"`
	CheckpointMap map[string]any `json:"checkpoint_map"`
}

// TaskCheckpoint is where a task that is a subgraph keeps its own state:
// its namespace (and, where a state of it is shown, its checkpoint).
type TaskCheckpoint struct {
	ThreadID     string  `json:"thread_id"`
	CheckpointNS string  `json:"checkpoint_ns"`
	CheckpointID *string `json:"checkpoint_id,omitempty"`
}

type State struct {
	Values           json.RawMessage `json:"values"`
	Next             []string        `json:"next"`
	Tasks            []Task          `json:"tasks"`
	Checkpoint       CheckpointRef   `json:"checkpoint"`
	Metadata         map[string]any  `json:"metadata"`
	CreatedAt        *string         `json:"created_at"`
	ParentCheckpoint *CheckpointRef  `json:"parent_checkpoint"`
	Interrupts       []Interrupt     `json:"interrupts"`
}

type Task struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Path is how the task was scheduled, as LangGraph names it: a node
	// pulled by its edges (["__pregel_pull", name]).
	Path       []string        `json:"path"`
	Error      *string         `json:"error"`
	Interrupts []Interrupt     `json:"interrupts"`
	Checkpoint *TaskCheckpoint `json:"checkpoint"`
	State      *State          `json:"state"`
	// Result is a finished task's update; a state's tasks are those still
	// to run, so it is null.
	Result json.RawMessage `json:"result"`
}

// MarshalJSON fills what a task always shows.
func (t Task) MarshalJSON() ([]byte, error) {
	type plain Task
	if t.Path == nil {
		t.Path = []string{"__pregel_pull", t.Name}
	}
	if len(t.Result) == 0 {
		t.Result = json.RawMessage("null")
	}
	return json.Marshal(plain(t))
}

// APITime formats a time as the API does.
func APITime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}

// Checkpoint ids are UUIDs (version 8) that carry the checkpoint's seq in
// their last 48 bits, so they sort as the seqs do and need no lookup:
// seq 5 is 00000000-0000-8000-8000-000000000005. The input checkpoint
// LangGraph shows before a run's first (see InputView) has its own
// prefix and the seq of the checkpoint it comes before:
// 00000000-0000-8000-8001-000000000005.
const (
	checkpointIDPrefix = "00000000-0000-8000-8000-"
	inputIDPrefix      = "00000000-0000-8000-8001-"
)

func CheckpointID(seq int64) string {
	return fmt.Sprintf("%s%012x", checkpointIDPrefix, seq)
}

// InputCheckpointID names the input checkpoint shown before checkpoint
// seq, a run's first.
func InputCheckpointID(seq int64) string {
	return fmt.Sprintf("%s%012x", inputIDPrefix, seq)
}

// CheckpointAt is the checkpoint an API id names: stored checkpoint Seq,
// or (Input) the input checkpoint shown before it.
type CheckpointAt struct {
	Seq   int64
	Input bool
}

// ParseCheckpointID reads a checkpoint id back; a plain seq (as the CLI
// prints it) is accepted too.
func ParseCheckpointID(s string) (CheckpointAt, error) {
	for _, p := range []struct {
		prefix string
		input  bool
	}{{checkpointIDPrefix, false}, {inputIDPrefix, true}} {
		if rest, ok := strings.CutPrefix(s, p.prefix); ok && len(rest) == 12 {
			if n, err := strconv.ParseInt(rest, 16, 64); err == nil && n > 0 {
				return CheckpointAt{Seq: n, Input: p.input}, nil
			}
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		return CheckpointAt{Seq: n}, nil
	}
	return CheckpointAt{}, fmt.Errorf("checkpoint_id %q is not a Cairn checkpoint id (%s<12 hex digits> or a seq)", s, checkpointIDPrefix)
}

func NewCheckpointRef(thread, ns string, seq int64) CheckpointRef {
	c := CheckpointRef{ThreadID: APIThreadID(thread), CheckpointNS: APINamespace(ns)}
	if seq > 0 {
		id := CheckpointID(seq)
		c.CheckpointID = &id
	}
	return c
}

// APINamespace writes a Cairn namespace (nested with "/") as LangGraph's
// checkpoint_ns (nested with "|").
func APINamespace(ns string) string { return strings.ReplaceAll(ns, "/", "|") }

// CairnNamespace reads a checkpoint_ns back.
func CairnNamespace(ns string) string { return strings.ReplaceAll(ns, "|", "/") }

// InterruptID names the interrupt of a checkpoint of a namespace (and,
// with a node's place, a task) of a thread (its key): by where it is in
// the thread and whose thread it is, not which thread, as LangGraph's ids
// follow checkpoint ids — a copy of a thread shows the same ids. Two
// tenants' ids differ; within a tenant an id names nothing beyond its
// thread, which every request that answers one names.
func InterruptID(thread, ns string, seq int64) string {
	tenant, _ := store.SplitThreadKey(thread)
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", tenant, ns, seq))
	return hex.EncodeToString(sum[:16])
}

// RunView is a run as the API shows it.
type RunView struct {
	RunID             string         `json:"run_id"`
	ThreadID          string         `json:"thread_id"`
	AssistantID       string         `json:"assistant_id"`
	CreatedAt         string         `json:"created_at"`
	UpdatedAt         string         `json:"updated_at"`
	Status            string         `json:"status"`
	Metadata          map[string]any `json:"metadata"`
	MultitaskStrategy string         `json:"multitask_strategy"`
	Kwargs            Kwargs         `json:"kwargs"`
	CancelReason      *string        `json:"cancel_reason"`
	// Error is a failed run's error (redacted); Cairn's own field.
	Error string `json:"error,omitempty"`
}

// RunViewOf is a run record as the API shows it.
func RunViewOf(rec store.RunRecord) (RunView, error) {
	d, err := DataOf(rec)
	if err != nil {
		return RunView{}, err
	}
	r := RunView{RunID: rec.ID, ThreadID: APIThreadID(rec.Thread), AssistantID: d.AssistantID, Status: rec.Status, Metadata: d.Metadata,
		MultitaskStrategy: d.MultitaskStrategy, Kwargs: d.Kwargs, CreatedAt: APITime(time.Unix(0, rec.CreatedAt)), UpdatedAt: APITime(time.Unix(0, rec.UpdatedAt))}
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	if d.CancelReason != "" {
		r.CancelReason = &d.CancelReason
	}
	r.Error = d.Error
	return r, nil
}
