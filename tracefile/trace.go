package tracefile

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/internal/jsontext"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Manifest is manifest.json.
type Manifest struct {
	RunID  string `json:"run_id"`
	Thread string `json:"thread"`
	// TaskID and Metadata are the id and the metadata of the task a loop
	// agent ran (QitOS's Task.id and Task.metadata), from the newest input
	// checkpoint that records one; absent for other runs.
	TaskID    string         `json:"task_id,omitempty"`
	Metadata  map[string]any `json:"metadata,omitzero"`
	Status    string         `json:"status"` // running, completed, failed, stopped
	StartedAt time.Time      `json:"started_at"`
	UpdatedAt time.Time      `json:"updated_at"`
	Summary   Summary        `json:"summary"`
}

// Summary is the manifest's summary.
type Summary struct {
	StopReason    string          `json:"stop_reason"`
	FinalResult   json.RawMessage `json:"final_result"`
	Steps         int             `json:"steps"`
	FailureReport *Failure        `json:"failure_report"`
}

// Failure describes why a run failed.
type Failure struct {
	StepID int64    `json:"step_id"`
	Nodes  []string `json:"nodes"`
	Error  string   `json:"error"`
}

// Event is one line of events.jsonl.
type Event struct {
	RunID   string         `json:"run_id"`
	StepID  int64          `json:"step_id"`
	Phase   string         `json:"phase"`
	OK      bool           `json:"ok"`
	Payload map[string]any `json:"payload"`
	Error   string         `json:"error,omitempty"`
	TS      time.Time      `json:"ts"`
}

// Step is one line of steps.jsonl. Observation, Decision, Actions,
// ActionResults, ToolInvocations and CriticOutputs are QitOS's step
// record: a loop agent records them in the checkpoint's metadata
// (Meta.Extra["step_record"]); other steps have null and empty lists.
type Step struct {
	StepID          int64                `json:"step_id"`
	Parent          int64                `json:"parent"`
	Nodes           []string             `json:"nodes"`
	Status          string               `json:"status"`
	Observation     json.RawMessage      `json:"observation"`
	Decision        json.RawMessage      `json:"decision"`
	Actions         []json.RawMessage    `json:"actions"`
	ActionResults   []json.RawMessage    `json:"action_results"`
	ToolInvocations []json.RawMessage    `json:"tool_invocations"`
	CriticOutputs   []json.RawMessage    `json:"critic_outputs"`
	Update          state.Patch          `json:"update"`
	StateDiff       map[string]FieldDiff `json:"state_diff"`
	Timings         map[string]float64   `json:"timings_ms,omitempty"`
	Tokens          *store.Tokens        `json:"tokens,omitempty"`
	TS              time.Time            `json:"ts"`
	Extra           map[string]any       `json:"-"`
}

// FieldDiff is a field's value before and after a step (null when absent).
type FieldDiff struct {
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// Export writes the trace layout of a thread's root namespace into dir
// (created if needed) and returns the manifest.
func Export(ctx context.Context, s store.Store, thread, dir string) (Manifest, error) {
	cps, err := rootHistory(ctx, s, thread)
	if err != nil {
		return Manifest{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Manifest{}, err
	}
	states := make(map[int64]state.Doc, len(cps))
	var events []Event
	var steps []Step
	runID := ""
	var task *taskRecord
	for _, cp := range cps {
		states[cp.Seq] = cp.State
		if cp.Meta.RunID != "" {
			runID = cp.Meta.RunID
		}
		if t, err := taskOf(cp); err != nil {
			return Manifest{}, fmt.Errorf("trace: task record of %s/%d: %w", thread, cp.Seq, err)
		} else if t != nil {
			task = t
		}
		events = append(events, eventOf(cp, runID))
		st, err := stepOf(cp, states[cp.Parent])
		if err != nil {
			return Manifest{}, fmt.Errorf("trace: step record of %s/%d: %w", thread, cp.Seq, err)
		}
		steps = append(steps, st)
	}
	m := manifestOf(thread, runID, task, cps[0], cps[len(cps)-1], len(cps))
	if err := writeJSON(filepath.Join(dir, "manifest.json"), m); err != nil {
		return Manifest{}, err
	}
	if err := writeLines(filepath.Join(dir, "events.jsonl"), events); err != nil {
		return Manifest{}, err
	}
	if err := writeLines(filepath.Join(dir, "steps.jsonl"), steps); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// rootHistory reads every checkpoint of the thread's root namespace with
// its state, oldest first.
func rootHistory(ctx context.Context, s store.Store, thread string) ([]store.Checkpoint, error) {
	var cps []store.Checkpoint
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: thread, WithState: true}) {
		if err != nil {
			return nil, err
		}
		cps = append(cps, cp)
	}
	if len(cps) == 0 {
		return nil, fmt.Errorf("%w: thread %q has no checkpoints", store.ErrNotFound, thread)
	}
	sort.Slice(cps, func(i, j int) bool { return cps[i].Seq < cps[j].Seq })
	return cps, nil
}

// eventOf is a checkpoint's line in events.jsonl.
func eventOf(cp store.Checkpoint, runID string) Event {
	phase := cp.Meta.Source
	switch {
	case cp.Status == store.StatusFailed:
		phase = "error"
	case cp.Status == store.StatusInterrupted:
		phase = "interrupt"
	case phase == "":
		phase = "step"
	}
	payload := map[string]any{"nodes": cp.Nodes, "next": cp.Meta.Next}
	if cp.Meta.Tokens != nil {
		payload["tokens"] = cp.Meta.Tokens
	}
	if len(cp.Meta.Interrupt) > 0 {
		payload["interrupt"] = cp.Meta.Interrupt
	}
	if cp.Meta.StopReason != "" {
		payload["stop_reason"] = cp.Meta.StopReason
	}
	// A stop on record (PARTIAL: a budget reached) is no failure.
	ok := cp.Status == store.StatusSuccess || cp.Status == store.StatusPartial
	return Event{RunID: runID, StepID: cp.Seq, Phase: phase, OK: ok,
		Payload: payload, Error: cp.Meta.Error, TS: cp.CreatedAt.UTC()}
}

// stepOf is a checkpoint's line in steps.jsonl: its patch, the fields it
// changed with their values before and after, and the loop agent's record.
func stepOf(cp store.Checkpoint, before state.Doc) (Step, error) {
	diff := map[string]FieldDiff{}
	for _, op := range cp.Patch {
		f := topField(op.Path)
		if f == "" {
			continue
		}
		if _, done := diff[f]; done {
			continue
		}
		b, _ := before.Raw(f)
		a, _ := cp.State.Raw(f)
		diff[f] = FieldDiff{Before: orNull(b), After: orNull(a)}
	}
	upd := cp.Patch
	if upd == nil {
		upd = state.Patch{}
	}
	st := Step{StepID: cp.Seq, Parent: cp.Parent, Nodes: cp.Nodes, Status: cp.Status.String(), Update: upd,
		StateDiff: diff, Timings: cp.Meta.DurationMS, Tokens: cp.Meta.Tokens, TS: cp.CreatedAt.UTC()}
	return st, st.record(cp.Meta.Extra[stepRecordKey])
}

// manifestOf summarises the run from its task (nil: none), its first and
// newest checkpoints and their number.
func manifestOf(thread, runID string, task *taskRecord, first, head store.Checkpoint, n int) Manifest {
	m := Manifest{RunID: runID, Thread: thread, StartedAt: first.CreatedAt.UTC(), UpdatedAt: head.CreatedAt.UTC()}
	if task != nil {
		m.TaskID, m.Metadata = task.ID, task.Metadata
		if m.Metadata == nil {
			m.Metadata = map[string]any{}
		}
	}
	m.Summary.Steps = n
	m.Summary.FinalResult = json.RawMessage("null")
	if fr, ok := head.State.Raw("final_result"); ok {
		m.Summary.FinalResult = fr
	}
	// The stop reason: recorded on the checkpoint where the run stopped short,
	// or set in the state, or implied by a final result.
	reason := head.Meta.StopReason
	if sr, ok := head.State.Raw("stop_reason"); ok && reason == "" {
		_ = json.Unmarshal(sr, &reason)
	}
	if reason == "" && string(m.Summary.FinalResult) != "null" {
		reason = string(state.StopFinal)
	}
	m.Status, m.Summary.StopReason = runStatus(head, reason)
	if head.Status == store.StatusFailed {
		m.Summary.FailureReport = &Failure{StepID: head.Seq, Nodes: head.Nodes, Error: head.Meta.Error}
	}
	return m
}

// runStatus is the manifest's status of a run whose newest checkpoint is
// head, and its stop reason.
func runStatus(head store.Checkpoint, reason string) (status, stop string) {
	switch {
	case head.Status == store.StatusFailed:
		if reason == "" {
			reason = string(state.StopUnrecoverableError)
		}
		return "failed", reason
	case head.Status == store.StatusInterrupted:
		return "stopped", string(state.StopInterrupt)
	case len(head.Meta.Next) > 0 && reason == "":
		return "running", reason
	}
	if reason == "" {
		reason = string(state.StopSuccess)
	}
	if reason != string(state.StopSuccess) && reason != string(state.StopFinal) {
		return "stopped", reason
	}
	return "completed", reason
}

// stepRecordKey is where loop agents keep a step's record (agent.StepRecordKey).
const stepRecordKey = "step_record"

// taskKey is where a loop agent records its task on its input checkpoint
// (agent.TaskRecordKey).
const taskKey = "task"

// taskRecord is a task's id and metadata (agent.TaskRecord).
type taskRecord struct {
	ID       string         `json:"id"`
	Metadata map[string]any `json:"metadata"`
}

// taskOf reads the task an input checkpoint records (nil: none).
func taskOf(cp store.Checkpoint) (*taskRecord, error) {
	v, ok := cp.Meta.Extra[taskKey]
	if !ok || cp.Meta.Source != "input" {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var t taskRecord
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// record fills the QitOS step-record fields from a checkpoint's record.
func (s *Step) record(v any) error {
	s.Observation, s.Decision = json.RawMessage("null"), json.RawMessage("null")
	s.Actions, s.ActionResults, s.ToolInvocations, s.CriticOutputs = []json.RawMessage{}, []json.RawMessage{}, []json.RawMessage{}, []json.RawMessage{}
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var r struct {
		Observation     json.RawMessage   `json:"observation"`
		Decision        json.RawMessage   `json:"decision"`
		Actions         []json.RawMessage `json:"actions"`
		ActionResults   []json.RawMessage `json:"action_results"`
		ToolInvocations []json.RawMessage `json:"tool_invocations"`
		CriticOutputs   []json.RawMessage `json:"critic_outputs"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	if r.Observation != nil {
		s.Observation = r.Observation
	}
	if r.Decision != nil {
		s.Decision = r.Decision
	}
	for _, l := range []struct {
		dst *[]json.RawMessage
		src []json.RawMessage
	}{
		{&s.Actions, r.Actions}, {&s.ActionResults, r.ActionResults}, {&s.ToolInvocations, r.ToolInvocations}, {&s.CriticOutputs, r.CriticOutputs},
	} {
		if l.src != nil {
			*l.dst = l.src
		}
	}
	return nil
}

func topField(path string) string {
	if len(path) < 2 {
		return ""
	}
	f, _, _ := strings.Cut(path[1:], "/")
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(f)
}

func orNull(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return b
}

func writeJSON(path string, v any) error {
	b, err := jsontext.MarshalIndent(v, "", "  ") // <, > and & as written
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func writeLines[T any](path string, items []T) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := jsontext.NewEncoder(w) // <, > and & as written
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
