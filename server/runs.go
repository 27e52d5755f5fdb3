package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Run statuses, as the API names them.
const (
	statusPending     = "pending"
	statusRunning     = "running"
	statusSuccess     = "success"
	statusError       = "error"
	statusInterrupted = "interrupted"
)

func terminal(status string) bool { return status != statusPending && status != statusRunning }

// runData is what a run's record keeps besides its indexed columns.
type runData struct {
	AssistantID       string         `json:"assistant_id"`
	Metadata          map[string]any `json:"metadata,omitempty"`
	MultitaskStrategy string         `json:"multitask_strategy,omitempty"`
	Kwargs            runKwargs      `json:"kwargs"`
	// FromSeq is the thread's head when the run was created (a rollback
	// returns there).
	FromSeq int64 `json:"from_seq"`
	// Temporary: a stateless run's thread, deleted when the run ends.
	Temporary    bool   `json:"temporary,omitempty"`
	Error        string `json:"error,omitempty"`
	ErrorType    string `json:"error_type,omitempty"`
	StopReason   string `json:"stop_reason,omitempty"`
	CancelReason string `json:"cancel_reason,omitempty"`
	Attempt      int    `json:"attempt"`
}

// runKwargs are the run's parameters, as the API shows them.
type runKwargs struct {
	Input           json.RawMessage `json:"input"`
	Command         *command        `json:"command,omitempty"`
	Config          *runConfig      `json:"config,omitempty"`
	StreamMode      []string        `json:"stream_mode"`
	StreamSubgraphs bool            `json:"stream_subgraphs"`
	InterruptBefore []string        `json:"interrupt_before,omitempty"`
	InterruptAfter  []string        `json:"interrupt_after,omitempty"`
	CheckpointID    string          `json:"checkpoint_id,omitempty"`
	OnDisconnect    string          `json:"on_disconnect"`
	OnCompletion    string          `json:"on_completion,omitempty"`
	Durability      string          `json:"durability,omitempty"`
	// Approval answers the thread's pause (POST …/interrupts/{id}/answer).
	Approval *flow.Approval `json:"approval,omitempty"`
}

// storedKwargs are a run's kwargs as its record keeps them: what has its
// default value is left out (see runData.MarshalJSON).
type storedKwargs struct {
	Input           json.RawMessage `json:"input"`
	Command         *command        `json:"command,omitempty"`
	Config          *runConfig      `json:"config,omitempty"`
	StreamMode      []string        `json:"stream_mode,omitempty"`
	StreamSubgraphs bool            `json:"stream_subgraphs,omitempty"`
	InterruptBefore []string        `json:"interrupt_before,omitempty"`
	InterruptAfter  []string        `json:"interrupt_after,omitempty"`
	CheckpointID    string          `json:"checkpoint_id,omitempty"`
	OnDisconnect    string          `json:"on_disconnect,omitempty"`
	OnCompletion    string          `json:"on_completion,omitempty"`
	Durability      string          `json:"durability,omitempty"`
	Approval        *flow.Approval  `json:"approval,omitempty"`
}

// The defaults a run record leaves out.
const (
	defaultStrategy     = "reject"
	defaultOnDisconnect = "continue"
	defaultStreamMode   = "values"
)

// MarshalJSON writes a run's record data without what has its default
// value, so that a record costs what the run asked for beside them.
func (d runData) MarshalJSON() ([]byte, error) {
	type plain runData
	p := plain(d)
	if p.MultitaskStrategy == defaultStrategy {
		p.MultitaskStrategy = ""
	}
	if p.StopReason == string(state.StopSuccess) {
		p.StopReason = ""
	}
	k := storedKwargs(d.Kwargs)
	if len(k.StreamMode) == 1 && k.StreamMode[0] == defaultStreamMode {
		k.StreamMode = nil
	}
	if k.OnDisconnect == defaultOnDisconnect {
		k.OnDisconnect = ""
	}
	return json.Marshal(struct {
		plain
		Kwargs storedKwargs `json:"kwargs"`
	}{p, k})
}

// UnmarshalJSON reads a run's record data, its defaults filled in.
func (d *runData) UnmarshalJSON(b []byte) error {
	type plain runData
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*d = runData(p)
	d.MultitaskStrategy = cmp.Or(d.MultitaskStrategy, defaultStrategy)
	d.Kwargs.OnDisconnect = cmp.Or(d.Kwargs.OnDisconnect, defaultOnDisconnect)
	if len(d.Kwargs.StreamMode) == 0 {
		d.Kwargs.StreamMode = []string{defaultStreamMode}
	}
	return nil
}

type command struct {
	Resume json.RawMessage `json:"resume"`
	Update json.RawMessage `json:"update"`
	Goto   json.RawMessage `json:"goto"`
}

type runConfig struct {
	Tags           []string       `json:"tags"`
	RecursionLimit int            `json:"recursion_limit"`
	Configurable   map[string]any `json:"configurable"`
	RunName        string         `json:"run_name"`
	MaxConcurrency int            `json:"max_concurrency"`
}

// runRequest is the body of every run-creating endpoint.
type runRequest struct {
	AssistantID       string            `json:"assistant_id"`
	Input             json.RawMessage   `json:"input"`
	Command           *command          `json:"command"`
	Config            *runConfig        `json:"config"`
	Context           json.RawMessage   `json:"context"`
	Metadata          map[string]any    `json:"metadata"`
	StreamMode        stringList        `json:"stream_mode"`
	StreamSubgraphs   bool              `json:"stream_subgraphs"`
	StreamResumable   bool              `json:"stream_resumable"`
	FeedbackKeys      json.RawMessage   `json:"feedback_keys"`
	InterruptBefore   stringList        `json:"interrupt_before"`
	InterruptAfter    stringList        `json:"interrupt_after"`
	Checkpoint        *checkpointConfig `json:"checkpoint"`
	CheckpointID      string            `json:"checkpoint_id"`
	Webhook           json.RawMessage   `json:"webhook"`
	MultitaskStrategy string            `json:"multitask_strategy"`
	OnCompletion      string            `json:"on_completion"`
	OnDisconnect      string            `json:"on_disconnect"`
	AfterSeconds      json.RawMessage   `json:"after_seconds"`
	IfNotExists       string            `json:"if_not_exists"`
	CheckpointDuring  *bool             `json:"checkpoint_during"`
	Durability        string            `json:"durability"`
	StrictResume      *bool             `json:"strict_resume"`
	LangsmithTracer   json.RawMessage   `json:"langsmith_tracer"`
	// approval: set by the answer endpoint, never by a client's body.
	approval *flow.Approval
	// deliver: the request answers with the run's outcome (runFromRequest).
	deliver bool
}

// oneOf checks an enumerated field.
func oneOf(path, v string, allowed ...string) error {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	return unprocessable(path, "%q: want %s", v, strings.Join(allowed, ", "))
}

// check validates the request against its assistant and returns the
// run's kwargs; nothing is created before it passes.
func (q *runRequest) check(s *Server) (Assistant, runKwargs, error) {
	var k runKwargs
	if err := unsupported(map[string]json.RawMessage{"webhook": q.Webhook, "after_seconds": q.AfterSeconds, "feedback_keys": q.FeedbackKeys, "context": emptyObject(q.Context)}); err != nil {
		return nil, k, err
	}
	if q.AssistantID == "" {
		return nil, k, unprocessable("$.assistant_id", "required (one of %s)", strings.Join(s.order, ", "))
	}
	a, ok := s.assistants[q.AssistantID]
	if !ok {
		return nil, k, notFound("assistant %q not found (have %s)", q.AssistantID, strings.Join(s.order, ", "))
	}
	for _, e := range []error{
		oneOf("$.multitask_strategy", q.MultitaskStrategy, "reject", "interrupt", "rollback", "enqueue"),
		oneOf("$.on_completion", q.OnCompletion, "delete", "keep"),
		oneOf("$.on_disconnect", q.OnDisconnect, "cancel", "continue"),
		oneOf("$.if_not_exists", q.IfNotExists, "create", "reject"),
		oneOf("$.durability", q.Durability, "sync", "async", "exit"),
	} {
		if e != nil {
			return nil, k, e
		}
	}
	modes := []string(q.StreamMode)
	if len(modes) == 0 {
		modes = []string{"values"}
	}
	for i, m := range modes {
		if _, ok := apiModes[m]; !ok {
			return nil, k, unprocessable(fmt.Sprintf("$.stream_mode[%d]", i), "%q: want values, updates, messages, messages-tuple, custom, checkpoints, tasks or debug", m)
		}
	}
	k = runKwargs{Input: q.Input, Command: q.Command, Config: q.Config, StreamMode: modes, StreamSubgraphs: q.StreamSubgraphs,
		OnDisconnect: cmp.Or(q.OnDisconnect, "continue"), OnCompletion: q.OnCompletion, Durability: q.Durability, Approval: q.approval}
	if q.CheckpointDuring != nil && !*q.CheckpointDuring && k.Durability == "" {
		k.Durability = "exit"
	}
	if err := q.checkInterrupts(a, &k); err != nil {
		return nil, k, err
	}
	if err := checkInput(a, q.Input); err != nil {
		return nil, k, err
	}
	if err := q.checkCommand(&k); err != nil {
		return nil, k, err
	}
	return a, k, nil
}

func emptyObject(b json.RawMessage) json.RawMessage {
	if s := strings.TrimSpace(string(b)); s == "{}" {
		return nil
	}
	return b
}

func (q *runRequest) checkInterrupts(a Assistant, k *runKwargs) error {
	nodes := a.Info().Nodes
	for path, list := range map[string]stringList{"$.interrupt_before": q.InterruptBefore, "$.interrupt_after": q.InterruptAfter} {
		var out []string
		for i, n := range list {
			switch {
			case n == "*":
				out = append(out, nodes...)
			case slices.Contains(nodes, n):
				out = append(out, n)
			default:
				return unprocessable(fmt.Sprintf("%s[%d]", path, i), "%q is not a node of assistant %q (%s)", n, a.Info().ID, strings.Join(nodes, ", "))
			}
		}
		if path == "$.interrupt_before" {
			k.InterruptBefore = out
		} else {
			k.InterruptAfter = out
		}
	}
	return nil
}

// checkCommand checks a run's command: resume, or goto "__end__" (end the
// thread at its pause); update and other goto targets answer 422. An
// input beside it must be empty (null or {}), as front ends send it.
func checkCommand(c *command, input json.RawMessage) error {
	if err := unsupported(map[string]json.RawMessage{"command.update": c.Update}); err != nil {
		return err
	}
	if in := strings.Join(strings.Fields(string(input)), ""); in != "" && in != "null" && in != "{}" {
		return unprocessable("$.command", "send input or a command, not both (an input of {} or null goes with a command)")
	}
	if isNull(c.Goto) {
		return nil
	}
	var one string
	var list []string
	if json.Unmarshal(c.Goto, &one) != nil && (json.Unmarshal(c.Goto, &list) != nil || len(list) != 1) {
		return unprocessable("$.command.goto", "want \"__end__\" or [\"__end__\"]")
	}
	if one == "" && list != nil {
		one = list[0]
	}
	if one != flow.END {
		return unprocessable("$.command.goto", "%q: only \"__end__\" (end the thread at its pause) is supported", one)
	}
	if !isNull(c.Resume) {
		return unprocessable("$.command", "send resume or goto, not both")
	}
	return nil
}

func (q *runRequest) checkCommand(k *runKwargs) error {
	if c := q.Command; c != nil {
		if err := checkCommand(c, q.Input); err != nil {
			return err
		}
		k.Input = nil // an empty input beside a command is none (the SDK's submit({}, {command}))
	}
	cid := q.CheckpointID
	if q.Checkpoint != nil && q.Checkpoint.CheckpointID != "" {
		cid = q.Checkpoint.CheckpointID
	}
	if q.Config != nil {
		if v, ok := q.Config.Configurable["checkpoint_id"].(string); ok && v != "" && cid == "" {
			cid = v
		}
		if q.Config.RecursionLimit < 0 {
			return unprocessable("$.config.recursion_limit", "%d must not be negative", q.Config.RecursionLimit)
		}
	}
	if cid != "" {
		if _, err := parseCheckpointID(cid); err != nil {
			return unprocessable("$.checkpoint_id", "%v", err)
		}
	}
	k.CheckpointID = cid
	return nil
}

// apiRunOf is a run record as the API shows it.
func apiRunOf(rec store.RunRecord) (apiRun, runData, error) {
	var d runData
	if err := json.Unmarshal(rec.Data, &d); err != nil {
		return apiRun{}, d, fmt.Errorf("%w: run %q: %v", store.ErrCorrupt, rec.ID, err)
	}
	r := apiRun{RunID: rec.ID, ThreadID: apiThreadID(rec.Thread), AssistantID: d.AssistantID, Status: rec.Status, Metadata: d.Metadata,
		MultitaskStrategy: d.MultitaskStrategy, Kwargs: d.Kwargs, CreatedAt: apiTime(time.Unix(0, rec.CreatedAt)), UpdatedAt: apiTime(time.Unix(0, rec.UpdatedAt))}
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	if d.CancelReason != "" {
		r.CancelReason = &d.CancelReason
	}
	r.Error = d.Error
	return r, d, nil
}

// createRun checks a run request, creates what it needs (the thread, if
// asked) and hands the run to the manager.
func (s *Server) createRun(ctx context.Context, threadID string, q runRequest) (*liveRun, error) {
	a, k, err := q.check(s)
	if err != nil {
		return nil, err
	}
	tenant := tenantOf(ctx)
	d := runData{AssistantID: a.Info().ID, Metadata: q.Metadata, MultitaskStrategy: cmp.Or(q.MultitaskStrategy, "reject"), Kwargs: k, Attempt: 1}
	d.Kwargs.Input = s.redact.JSON(d.Kwargs.Input)
	if ap := d.Kwargs.Approval; ap != nil {
		red := *ap
		red.Value, red.Reason = s.redact.JSON(ap.Value), s.redact.String(ap.Reason)
		d.Kwargs.Approval = &red
	}
	if d.Kwargs.Command != nil {
		d.Kwargs.Command.Resume = s.redact.JSON(d.Kwargs.Command.Resume)
	}
	var th store.Thread
	if threadID == "" {
		d.Temporary = k.OnCompletion != "keep"
		th, err = s.store.CreateThread(ctx, store.Thread{ID: threadKey(ctx, uuid.NewString()), Tenant: tenant, Metadata: s.threadMetadata(nil, a)})
	} else if th, err = s.thread(ctx, threadID); err != nil && q.IfNotExists == "create" && statusOf(err) == http.StatusNotFound {
		th, err = s.store.CreateThread(ctx, store.Thread{ID: threadKey(ctx, threadID), Tenant: tenant, Metadata: s.threadMetadata(nil, a)})
		if errors.Is(err, store.ErrConflict) {
			th, err = s.thread(ctx, threadID)
		}
	}
	if err != nil {
		return nil, err
	}
	if c := d.Kwargs.Command; c != nil && !isNull(c.Resume) {
		if err := s.checkResume(ctx, a, th, "$.command.resume", c.Resume); err != nil {
			return nil, err
		}
	}
	if err := s.adoptThread(ctx, &th, a); err != nil {
		return nil, err
	}
	if err := s.checkFresh(ctx, th, a, k, d.MultitaskStrategy); err != nil {
		return nil, err
	}
	d.FromSeq = th.Head
	now := s.cfg.Now().UnixNano()
	rec := store.RunRecord{ID: uuid.NewString(), Thread: th.ID, Tenant: tenant, Status: statusPending, CreatedAt: now, UpdatedAt: now}
	if s.queue != nil {
		lr := &liveRun{rec: rec, data: d, a: a}
		if err := s.enqueue(ctx, lr); err != nil {
			if d.Temporary {
				_ = s.store.DeleteThread(context.WithoutCancel(ctx), th.ID)
			}
			return nil, err
		}
		return lr, nil
	}
	lr := s.runs.newLive(rec, d, a, nil)
	if d.Temporary && q.deliver {
		lr.delivered = make(chan struct{})
	}
	if err := s.runs.submit(ctx, lr, d.MultitaskStrategy); err != nil {
		if d.Temporary {
			_ = s.store.DeleteThread(context.WithoutCancel(ctx), th.ID)
		}
		return nil, err
	}
	return lr, nil
}

// checkFresh refuses a new run of an agent or pipeline file on a thread
// whose last run has not finished (interrupted, failed, or stopped with
// steps left), unless the client asked to replace it: the thread is
// resumed with a command, or the strategy is interrupt or rollback.
func (s *Server) checkFresh(ctx context.Context, th store.Thread, a Assistant, k runKwargs, strategy string) error {
	if a.Info().Kind != "agent" || isNull(k.Input) || k.CheckpointID != "" || strategy == "interrupt" || strategy == "rollback" || th.Head == 0 || s.busy(ctx, th.ID) {
		return nil
	}
	head, err := s.store.Load(ctx, store.LoadRequest{Thread: th.ID})
	if err != nil || !agentfile.Unfinished(head) {
		return err
	}
	return conflict("thread %q has an unfinished run (checkpoint %s, %s): resume it with a command (or no input), or start over with multitask_strategy interrupt",
		apiThreadID(th.ID), checkpointID(head.Seq), strings.ToLower(head.Status.String()))
}

// threadMetadata is the metadata a thread of assistant a carries, so that
// the server and the CLI know what runs on it.
func (s *Server) threadMetadata(md map[string]any, a Assistant) map[string]any {
	out := map[string]any{}
	for k, v := range md {
		out[k] = v
	}
	info := a.Info()
	set := func(k, v string) {
		if _, ok := out[k]; !ok && v != "" {
			out[k] = v
		}
	}
	set("graph_id", info.ID)
	set("assistant_id", info.ID)
	if info.File != "" {
		set("kind", info.Kind)
		set("file", info.File)
	}
	return out
}

// adoptThread records the assistant in the thread's metadata when it names
// none, and refuses a thread that another file runs.
func (s *Server) adoptThread(ctx context.Context, th *store.Thread, a Assistant) error {
	info := a.Info()
	if f, ok := th.Metadata["file"].(string); ok && info.File != "" && f != info.File {
		return conflict("thread %q runs %s, not assistant %q", apiThreadID(th.ID), f, info.ID)
	}
	md := s.threadMetadata(th.Metadata, a)
	if len(md) == len(th.Metadata) {
		return nil
	}
	t, err := s.store.SetMetadata(ctx, th.ID, md)
	if err == nil {
		*th = t
	}
	return err
}

// spec is what the assistant runs for a run: a new run from its input,
// or a resume (an answer to an interrupt, a run from a checkpoint, an
// unfinished thread continued).
func (m *runManager) spec(ctx context.Context, lr *liveRun) (RunSpec, error) {
	k := lr.data.Kwargs
	spec := RunSpec{Store: m.s.store, Thread: lr.rec.Thread, RunID: lr.rec.ID, Input: k.Input, InterruptBefore: k.InterruptBefore, InterruptAfter: k.InterruptAfter,
		Durability: flow.Durability(k.Durability), Stream: flow.StreamOptions{Modes: flowModes(k.StreamMode), Subgraphs: k.StreamSubgraphs}}
	if k.Config != nil {
		spec.RecursionLimit = k.Config.RecursionLimit
	}
	spec.Abandon = lr.data.MultitaskStrategy == "interrupt" || lr.data.MultitaskStrategy == "rollback"
	if lr.started {
		spec.Resume = true
	} else if k.CheckpointID != "" {
		seq, _ := parseCheckpointID(k.CheckpointID) // checked when the run was created
		if err := m.forkAt(ctx, lr.rec.Thread, seq); err != nil {
			return spec, err
		}
		spec.Resume = isNull(k.Input)
	} else if isNull(k.Input) {
		head, err := m.s.store.Load(ctx, store.LoadRequest{Thread: lr.rec.Thread})
		spec.Resume = err == nil && agentfile.Unfinished(head)
	}
	if k.Approval != nil {
		spec.Resume, spec.Answer = true, *k.Approval
	}
	if c := k.Command; c != nil {
		spec.Resume = true
		if !isNull(c.Goto) { // checked: "__end__"
			return spec, m.endThread(ctx, lr.rec.Thread)
		}
		if !isNull(c.Resume) {
			var v any
			if err := json.Unmarshal(c.Resume, &v); err != nil {
				return spec, unprocessable("$.command.resume", "%v", err)
			}
			spec.Answer = v
		}
	}
	return spec, nil
}

// endThread ends a thread where it stands (command goto "__end__"): a
// checkpoint after the head with the head's state and nothing scheduled,
// so a pending step never runs and the thread is idle.
func (m *runManager) endThread(ctx context.Context, thread string) error {
	head, err := m.s.store.Load(ctx, store.LoadRequest{Thread: thread})
	if err != nil {
		return err
	}
	_, err = m.s.store.Append(ctx, store.Checkpoint{Thread: thread, Parent: head.Seq, Nodes: []string{flow.END}, State: head.State,
		Status: store.StatusSuccess, Meta: store.Meta{Source: "update"}})
	return err
}

func isNull(b json.RawMessage) bool {
	s := strings.TrimSpace(string(b))
	return s == "" || s == "null"
}

// forkAt makes checkpoint seq the thread's head (a new branch), for a run
// from that checkpoint.
func (m *runManager) forkAt(ctx context.Context, thread string, seq int64) error {
	th, err := m.s.store.Thread(ctx, thread)
	if err != nil {
		return err
	}
	if th.Head == seq {
		return nil
	}
	_, err = m.s.store.Fork(ctx, store.ForkRequest{Thread: thread, At: seq})
	return err
}
