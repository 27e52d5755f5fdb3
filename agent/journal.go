package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
)

// toolJournal makes the calls of a tool loop durable one by one, through
// the running step's journal (flow.Record, flow.Recorded): each model
// reply and each tool result is recorded as soon as it arrives, and when
// the step runs again after a crash the loop replays them instead of
// calling the model or the tool again, then goes on live from where the
// crash cut it.
//
// Entries are chained: each records a digest of what came before it (the
// loop's first request, then the bytes of the previous entry as stored),
// and a tool result also records the call it answers. Replay stops at the
// first entry that does not fit — another process's attempt, a changed
// prompt — and everything from there on runs live.
type toolJournal struct {
	prev string // digest of what the next entry follows
	live bool   // replay is over: call, and record
}

// modelEntry is the journal entry of one model call.
type modelEntry struct {
	Prev    string  `json:"prev"`
	Message Message `json:"message"`
	Usage   Usage   `json:"usage"`
	Model   string  `json:"model,omitempty"`
}

// toolEntry is the journal entry of one tool call.
type toolEntry struct {
	Prev   string          `json:"prev"`
	Name   string          `json:"name"`
	Args   json.RawMessage `json:"args"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
	// KV is the key-value writes of the loop so far, the tool's included
	// (KV.Update), so a replay makes them again.
	KV json.RawMessage `json:"kv,omitempty"`
}

// newToolJournal starts the chain at the loop's first request.
func newToolJournal(msgs []Message) *toolJournal {
	b, _ := json.Marshal(msgs) // messages always marshal
	return &toolJournal{prev: digest(b)}
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// replay reads entry name into out when replay is still on and the entry
// follows the chain (check accepts it); otherwise it turns replay off.
func (j *toolJournal) replay(ctx context.Context, name string, out interface{ prevDigest() string }, check func() bool) (bool, error) {
	if j.live {
		return false, nil
	}
	raw, ok, err := flow.Recorded(ctx, name)
	if err != nil || !ok {
		j.live = true
		return false, err
	}
	if json.Unmarshal(raw, out) != nil || out.prevDigest() != j.prev || !check() {
		j.live = true
		return false, nil
	}
	j.prev = digest(raw)
	return true, nil
}

// record stores an entry and moves the chain on.
func (j *toolJournal) record(ctx context.Context, name string, v any) error {
	j.live = true
	b, err := flow.Record(ctx, name, v)
	if err != nil {
		return err
	}
	if b != nil {
		j.prev = digest(b)
	}
	return nil
}

func (e *modelEntry) prevDigest() string { return e.Prev }
func (e *toolEntry) prevDigest() string  { return e.Prev }

// generate answers model call round from the journal, or calls the model
// and records its reply.
func (j *toolJournal) generate(ctx context.Context, m Model, req Request, round int) (Response, error) {
	name := "model/" + strconv.Itoa(round)
	var e modelEntry
	if ok, err := j.replay(ctx, name, &e, func() bool { return true }); err != nil {
		return Response{}, err
	} else if ok {
		flow.BeginCall(ctx) // the call keeps its position among the task's calls
		return Response{Message: e.Message, Usage: e.Usage, Model: e.Model}, nil
	}
	resp, err := generateRecorded(ctx, m, req, "", name)
	if err != nil {
		return resp, err
	}
	if err := j.record(ctx, name, modelEntry{Prev: j.prev, Message: resp.Message, Usage: resp.Usage, Model: resp.Model}); err != nil {
		return resp, fmt.Errorf("agent: recording model call %d: %w", round, err)
	}
	return resp, nil
}

// runTool answers a tool call from the journal, or runs it and records
// its result. tc.Key names the call.
func (j *toolJournal) runTool(ctx context.Context, byName map[string]Tool, call ToolCall, tc ToolContext, round, index int) (ToolResult, error) {
	name := "tool/" + strconv.Itoa(round) + "." + strconv.Itoa(index)
	var e toolEntry
	if ok, err := j.replay(ctx, name, &e, func() bool { return e.Name == call.Name && sameJSON(e.Args, call.Args) }); err != nil {
		return ToolResult{}, err
	} else if ok {
		if err := replayKV(tc.KV, e.KV); err != nil {
			return ToolResult{}, err
		}
		flow.BeginCall(ctx) // the call keeps its position among the task's calls
		return ToolResult{ID: call.ID, Name: call.Name, Output: e.Output, Error: e.Error}, nil
	}
	tr := runToolRecorded(ctx, byName, call, tc)
	if ctx.Err() != nil {
		return tr, nil // cut short by the run's cancellation: not a result to keep
	}
	entry := toolEntry{Prev: j.prev, Name: call.Name, Args: call.Args, Output: tr.Output, Error: tr.Error}
	if tc.KV != nil {
		entry.KV, _ = tc.KV.Update()[state.KVField].(json.RawMessage)
	}
	if err := j.record(ctx, name, entry); err != nil {
		return tr, fmt.Errorf("agent: recording tool call %s: %w", name, err)
	}
	return tr, nil
}

// replayKV makes the recorded key-value writes again.
func replayKV(kv *state.KV, writes json.RawMessage) error {
	if kv == nil || len(writes) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(writes, &m); err != nil {
		return fmt.Errorf("agent: journal: key-value writes: %w", err)
	}
	for k, v := range m {
		if err := kv.Set(k, v); err != nil {
			return err
		}
	}
	return nil
}

// sameJSON reports whether two JSON texts hold the same value (the
// journal stores arguments compacted, and may have redacted them).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if len(a) == 0 {
		a = json.RawMessage("null")
	}
	if len(b) == 0 {
		b = json.RawMessage("null")
	}
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x) // decoded JSON always encodes
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// steerEntry is the journal entry of the messages a loop took from the
// thread's inbox before model call round (flow.TakeSteers).
type steerEntry struct {
	Prev     string    `json:"prev"`
	Messages []Message `json:"messages"`
	UpTo     int64     `json:"up_to"`
}

func (e *steerEntry) prevDigest() string { return e.Prev }

// steers returns the messages sent to the thread's running run since the
// loop's last model call (flow.TakeSteers), to add before model call
// round, recorded in the journal; a rerun takes what the journal says
// the earlier attempt took there, and nothing where it took nothing, and
// a run under a replay's tape what the recorded run took.
func (j *toolJournal) steers(ctx context.Context, round int) ([]Message, error) {
	name := "steer/" + strconv.Itoa(round)
	if !j.live {
		if _, ok, err := flow.Recorded(ctx, name); err != nil || !ok {
			return nil, err // the earlier attempt took nothing here
		}
		var e steerEntry
		if ok, err := j.replay(ctx, name, &e, func() bool { return true }); err != nil {
			return nil, err
		} else if ok {
			flow.SteersTaken(ctx, e.UpTo)
			return e.Messages, nil
		}
	}
	var msgs []Message
	var upTo int64
	if tp := flow.TapeOf(ctx); tp != nil {
		e, err := steersTaped(ctx, tp, name, round)
		if err != nil || e == nil {
			return nil, err
		}
		msgs, upTo = e.Messages, e.UpTo
		flow.SteersTaken(ctx, upTo)
	} else {
		raw, at, err := flow.TakeSteers(ctx)
		if err != nil || len(raw) == 0 {
			return nil, err
		}
		for _, r := range raw {
			msgs = append(msgs, steerMessage(r))
		}
		upTo = at
	}
	if err := j.record(ctx, name, steerEntry{Prev: j.prev, Messages: msgs, UpTo: upTo}); err != nil {
		return nil, fmt.Errorf("agent: recording the messages taken before model call %d: %w", round, err)
	}
	return msgs, nil
}

// steersTaped asks a replay's tape what the recorded loop took from the
// inbox before model call round (nil: nothing).
func steersTaped(ctx context.Context, tp flow.Tape, name string, round int) (*steerEntry, error) {
	info, _ := flow.Info(ctx)
	raw, err := tp.Answer(ctx, flow.Call{Task: info, Index: round, Kind: flow.CallSteer, Name: name})
	if err != nil || raw == nil {
		return nil, err
	}
	var e steerEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotRecorded, name, err)
	}
	return &e, nil
}

// steerMessage is a message of the state's shape ({type or role,
// content}) as a loop's Message: human is the user's.
func steerMessage(raw json.RawMessage) Message {
	var m struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Name    string          `json:"name"`
	}
	_ = json.Unmarshal(raw, &m) // TakeSteers gives objects
	role := map[string]Role{"human": RoleUser, "user": RoleUser, "system": RoleSystem, "ai": RoleAssistant, "assistant": RoleAssistant}[m.Type+m.Role]
	if role == "" {
		role = RoleUser
	}
	var text string
	if json.Unmarshal(m.Content, &text) != nil {
		text = string(m.Content) // content blocks, as JSON
	}
	return Message{Role: role, Content: text, Name: m.Name}
}
