package runs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// Run statuses, as the API names them.
const (
	StatusPending     = "pending"
	StatusRunning     = "running"
	StatusSuccess     = "success"
	StatusError       = "error"
	StatusInterrupted = "interrupted"
)

func Terminal(status string) bool { return status != StatusPending && status != StatusRunning }

// Data is what a run's record keeps besides its indexed columns.
type Data struct {
	AssistantID string `json:"assistant_id"`
	// GraphID is the graph of an assistant a client made
	// (CreateAssistant); empty when AssistantID is a system assistant's,
	// its graph's id.
	GraphID           string         `json:"graph_id,omitempty"`
	Metadata          map[string]any `json:"metadata,omitempty"`
	MultitaskStrategy string         `json:"multitask_strategy,omitempty"`
	Kwargs            Kwargs         `json:"kwargs"`
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
	// Ordinal numbers the thread's runs from 1 in the order they were
	// made: the high bits of their events' seqs in the thread-centric
	// stream (V2SeqBase).
	Ordinal int64 `json:"ordinal,omitempty"`
}

// Kwargs are the run's parameters, as the API shows them.
type Kwargs struct {
	Input           json.RawMessage `json:"input"`
	Command         *Command        `json:"command,omitempty"`
	Config          *RunConfig      `json:"config,omitempty"`
	Context         json.RawMessage `json:"context,omitempty"`
	StreamMode      []string        `json:"stream_mode"`
	StreamSubgraphs bool            `json:"stream_subgraphs"`
	InterruptBefore []string        `json:"interrupt_before,omitempty"`
	InterruptAfter  []string        `json:"interrupt_after,omitempty"`
	CheckpointID    string          `json:"checkpoint_id,omitempty"`
	OnDisconnect    string          `json:"on_disconnect"`
	OnCompletion    string          `json:"on_completion,omitempty"`
	Durability      string          `json:"durability,omitempty"`
	// AfterSeconds delays the run's start (after_seconds): it stays
	// pending, its thread busy, until then.
	AfterSeconds float64 `json:"after_seconds,omitempty"`
	// Approval answers the thread's pause (POST …/interrupts/{id}/answer).
	Approval *flow.Approval `json:"approval,omitempty"`
	// Webhook is posted the run when it ends.
	Webhook string `json:"webhook,omitempty"`
}

// storedKwargs are a run's kwargs as its record keeps them: what has its
// default value is left out (see Data.MarshalJSON).
type storedKwargs struct {
	Input           json.RawMessage `json:"input"`
	Command         *Command        `json:"command,omitempty"`
	Config          *RunConfig      `json:"config,omitempty"`
	Context         json.RawMessage `json:"context,omitempty"`
	StreamMode      []string        `json:"stream_mode,omitempty"`
	StreamSubgraphs bool            `json:"stream_subgraphs,omitempty"`
	InterruptBefore []string        `json:"interrupt_before,omitempty"`
	InterruptAfter  []string        `json:"interrupt_after,omitempty"`
	CheckpointID    string          `json:"checkpoint_id,omitempty"`
	OnDisconnect    string          `json:"on_disconnect,omitempty"`
	OnCompletion    string          `json:"on_completion,omitempty"`
	Durability      string          `json:"durability,omitempty"`
	AfterSeconds    float64         `json:"after_seconds,omitempty"`
	Approval        *flow.Approval  `json:"approval,omitempty"`
	Webhook         string          `json:"webhook,omitempty"`
}

// The defaults a run record leaves out.
const (
	defaultStrategy     = "reject"
	defaultOnDisconnect = "continue"
	defaultStreamMode   = "values"
)

// MarshalJSON writes a run's record data without what has its default
// value, so that a record costs what the run asked for beside them.
func (d Data) MarshalJSON() ([]byte, error) {
	type plain Data
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
func (d *Data) UnmarshalJSON(b []byte) error {
	type plain Data
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*d = Data(p)
	d.MultitaskStrategy = cmp.Or(d.MultitaskStrategy, defaultStrategy)
	d.Kwargs.OnDisconnect = cmp.Or(d.Kwargs.OnDisconnect, defaultOnDisconnect)
	if len(d.Kwargs.StreamMode) == 0 {
		d.Kwargs.StreamMode = []string{defaultStreamMode}
	}
	return nil
}

// OneOf checks an enumerated field.
func OneOf(path, v string, allowed ...string) error {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	return invalid(path, "%q: want %s", v, strings.Join(allowed, ", "))
}

// check validates the request against its assistant and returns the
// run's kwargs; nothing is created before it passes.
func (q *Request) check(ctx context.Context, s *Service) (Assistant, Kwargs, *AssistantRecord, error) {
	var k Kwargs
	if err := Unsupported(map[string]json.RawMessage{"feedback_keys": q.FeedbackKeys}); err != nil {
		return nil, k, nil, err
	}
	if q.AssistantID == "" {
		return nil, k, nil, invalid("$.assistant_id", "required (one of %s)", strings.Join(s.order, ", "))
	}
	a, rec, err := s.resolve(ctx, q.AssistantID)
	if err != nil {
		return nil, k, nil, err
	}
	k, err = q.kwargs(a)
	if err == nil {
		k.Webhook, err = s.checkWebhook(ctx, q.Webhook)
	}
	if err == nil && rec != nil {
		k.Config, k.Context = rec.runConfig(k.Config), rec.runContext(k.Context)
	}
	return a, k, rec, err
}

// kwargs checks the request against its assistant and makes the run's
// kwargs.
func (q *Request) kwargs(a Assistant) (Kwargs, error) {
	var k Kwargs
	for _, e := range []error{
		OneOf("$.multitask_strategy", q.MultitaskStrategy, "reject", "interrupt", "rollback", "enqueue"),
		OneOf("$.on_completion", q.OnCompletion, "delete", "keep"),
		OneOf("$.on_disconnect", q.OnDisconnect, "cancel", "continue"),
		OneOf("$.if_not_exists", q.IfNotExists, "create", "reject"),
		OneOf("$.durability", q.Durability, "sync", "async", "exit"),
	} {
		if e != nil {
			return k, e
		}
	}
	modes := []string(q.StreamMode)
	if len(modes) == 0 {
		modes = []string{"values"}
	}
	for i, m := range modes {
		if _, ok := apiModes[m]; !ok {
			return k, invalid(fmt.Sprintf("$.stream_mode[%d]", i), "%q: want values, updates, messages, messages-tuple, custom, checkpoints, tasks, debug or events", m)
		}
	}
	if err := checkContext(q.Context); err != nil {
		return k, err
	}
	if a := q.AfterSeconds; a != nil && (*a < 0 || *a > maxAfterSeconds) {
		return k, invalid("$.after_seconds", "%g: want 0 to %d seconds", *a, maxAfterSeconds)
	}
	k = Kwargs{Input: q.Input, Command: q.Command, Config: q.Config, Context: q.Context, StreamMode: modes, StreamSubgraphs: q.StreamSubgraphs,
		OnDisconnect: cmp.Or(q.OnDisconnect, "continue"), OnCompletion: q.OnCompletion, Durability: q.Durability, Approval: q.approval}
	if q.AfterSeconds != nil {
		k.AfterSeconds = *q.AfterSeconds
	}
	if q.CheckpointDuring != nil && !*q.CheckpointDuring && k.Durability == "" {
		k.Durability = "exit"
	}
	if err := q.checkInterrupts(a, &k); err != nil {
		return k, err
	}
	if err := checkInput(a, q.Input); err != nil {
		return k, err
	}
	if err := q.checkCommand(&k); err != nil {
		return k, err
	}
	return k, nil
}

// maxAfterSeconds bounds after_seconds (a day).
const maxAfterSeconds = 24 * 60 * 60

// checkContext checks a run's context: a JSON object (LangGraph's runtime
// context), or none.
func checkContext(c json.RawMessage) error {
	if IsNull(c) {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(c, &obj) != nil {
		return invalid("$.context", "want a JSON object (the run's context), not %.40s", strings.TrimSpace(string(c)))
	}
	return nil
}

// checkInterrupts reads interrupt_before and interrupt_after: node names,
// or "*" for every node.
func (q *Request) checkInterrupts(a Assistant, k *Kwargs) error {
	nodes := a.Info().Nodes
	for path, list := range map[string]StringList{"$.interrupt_before": q.InterruptBefore, "$.interrupt_after": q.InterruptAfter} {
		var out []string
		for i, n := range list {
			switch {
			case n == "*":
				out = append(out, nodes...)
			case n == "":
				return invalid(fmt.Sprintf("%s[%d]", path, i), "an empty node name (nodes of assistant %q: %s)", a.Info().ID, strings.Join(nodes, ", "))
			default:
				// A name the drawn graph lacks pauses nothing there, as in
				// LangGraph: it may be a node of the graph built for the
				// run's config.
				out = append(out, n)
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
func checkCommand(c *Command, input json.RawMessage) error {
	if !IsNull(c.Update) {
		var obj map[string]json.RawMessage
		if json.Unmarshal(c.Update, &obj) != nil {
			return invalid("$.command.update", "want an object of state fields, not %.40s", strings.TrimSpace(string(c.Update)))
		}
	}
	if in := strings.Join(strings.Fields(string(input)), ""); in != "" && in != "null" && in != "{}" {
		return invalid("$.command", "send input or a command, not both (an input of {} or null goes with a command)")
	}
	if IsNull(c.Goto) {
		return nil
	}
	var one string
	var list []string
	if json.Unmarshal(c.Goto, &one) != nil && (json.Unmarshal(c.Goto, &list) != nil || len(list) != 1) {
		return invalid("$.command.goto", "want \"__end__\" or [\"__end__\"]")
	}
	if one == "" && list != nil {
		one = list[0]
	}
	if one != flow.END {
		return invalid("$.command.goto", "%q: only \"__end__\" (end the thread at its pause) is supported", one)
	}
	if !IsNull(c.Resume) {
		return invalid("$.command", "send resume or goto, not both")
	}
	return nil
}

func (q *Request) checkCommand(k *Kwargs) error {
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
			return invalid("$.config.recursion_limit", "%d must not be negative", q.Config.RecursionLimit)
		}
	}
	if cid != "" {
		if _, err := ParseCheckpointID(cid); err != nil {
			return invalid("$.checkpoint_id", "%v", err)
		}
	}
	k.CheckpointID = cid
	return nil
}

// Graph is the id of the graph the run runs: its system assistant's.
func (d Data) Graph() string { return cmp.Or(d.GraphID, d.AssistantID) }

// DataOf reads what a run's record keeps besides its indexed columns.
func DataOf(rec store.RunRecord) (Data, error) {
	var d Data
	if err := json.Unmarshal(rec.Data, &d); err != nil {
		return d, fmt.Errorf("%w: run %q: %v", store.ErrCorrupt, rec.ID, err)
	}
	return d, nil
}

// Create checks a run request, creates what it needs (the thread, if
// asked) and hands the run to the manager.
func (s *Service) Create(ctx context.Context, threadID string, q Request) (*Run, error) {
	a, k, stored, err := q.check(ctx, s)
	if err != nil {
		return nil, err
	}
	tenant := TenantOf(ctx)
	d := s.runData(a, stored, q, k)
	if c := k.Command; c != nil && !IsNull(c.Update) {
		if err := s.checkUpdatable(ctx, threadID); err != nil {
			return nil, err
		}
	}
	var th store.Thread
	if threadID == "" {
		d.Temporary = k.OnCompletion != "keep"
		th, err = s.store.CreateThread(ctx, store.Thread{ID: ThreadKey(ctx, uuid.NewString()), Tenant: tenant, Metadata: s.ThreadMetadata(nil, a, d.AssistantID)})
	} else if th, err = s.Thread(ctx, threadID); err != nil && q.IfNotExists == "create" && errors.Is(err, store.ErrNotFound) {
		th, err = s.store.CreateThread(ctx, store.Thread{ID: ThreadKey(ctx, threadID), Tenant: tenant, Metadata: s.ThreadMetadata(nil, a, d.AssistantID)})
		if errors.Is(err, store.ErrConflict) {
			th, err = s.Thread(ctx, threadID)
		}
	}
	if err != nil {
		return nil, err
	}
	d.Temporary = d.Temporary || q.temporary
	if c := d.Kwargs.Command; c != nil && !IsNull(c.Resume) {
		if err := s.checkResume(ctx, a, th, "$.command.resume", c.Resume); err != nil {
			return nil, err
		}
	}
	if err := s.mayStart(ctx, th, a, k, d.MultitaskStrategy); err != nil {
		return nil, err
	}
	if err := s.adoptThread(ctx, &th, a, d.AssistantID); err != nil {
		return nil, err
	}
	d.FromSeq = th.Head
	if d.Ordinal, err = s.nextOrdinal(ctx, th.ID); err != nil {
		return nil, err
	}
	now := s.cfg.Now().UnixNano()
	rec := store.RunRecord{ID: cmp.Or(q.runID, uuid.NewString()), Thread: th.ID, Tenant: tenant, Status: StatusPending, CreatedAt: now, UpdatedAt: now}
	if s.queue != nil {
		lr := &Run{rec: rec, data: d, a: a}
		if err := s.enqueue(ctx, lr); err != nil {
			if d.Temporary {
				_ = s.store.DeleteThread(context.WithoutCancel(ctx), th.ID)
			}
			return nil, err
		}
		return lr, nil
	}
	lr := s.runs.newLive(rec, d, a, nil)
	if d.Temporary && q.Deliver {
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

// runData is what a new run's record keeps: its assistant (and graph,
// for one a client made), metadata, strategy and kwargs, what a client
// sent redacted.
func (s *Service) runData(a Assistant, stored *AssistantRecord, q Request, k Kwargs) Data {
	d := Data{AssistantID: a.Info().ID, Metadata: q.Metadata, MultitaskStrategy: cmp.Or(q.MultitaskStrategy, "reject"), Kwargs: k, Attempt: 1}
	if stored != nil {
		d.AssistantID, d.GraphID = stored.AssistantID, stored.GraphID
	}
	d.Kwargs.Input = s.redact.JSON(d.Kwargs.Input)
	if !IsNull(d.Kwargs.Context) {
		d.Kwargs.Context = s.redact.JSON(d.Kwargs.Context)
	}
	if ap := d.Kwargs.Approval; ap != nil {
		red := *ap
		red.Value, red.Reason = s.redact.JSON(ap.Value), s.redact.String(ap.Reason)
		d.Kwargs.Approval = &red
	}
	if c := d.Kwargs.Command; c != nil {
		cc := *c
		cc.Resume, cc.Update = s.redact.JSON(c.Resume), s.redact.JSON(c.Update)
		d.Kwargs.Command = &cc
	}
	return d
}

// mayStart asks agentfile.CheckStart, the one rule of every front end,
// whether a run of a may start on thread th: the thread must run a's file
// (a thread that names none takes it), and a new run of an agent file's
// chain may not abandon an unfinished one unless the client asked to
// replace it (multitask strategy interrupt or rollback). A run that
// continues the thread (no input, a command, a checkpoint), a thread that
// held no checkpoint when the run was asked for or is busy with a run
// this one waits behind (the rule applies when it starts: its first run
// may have committed since), a
// pipeline (it goes on where it stopped) and a Go graph (LangGraph's rule:
// new input runs from the head) continue.
func (s *Service) mayStart(ctx context.Context, th store.Thread, a Assistant, k Kwargs, strategy string) error {
	info := a.Info()
	q := agentfile.StartRequest{Thread: th.ID, Kind: info.Kind, File: info.File, Adopt: true,
		Abandon: strategy == "interrupt" || strategy == "rollback"}
	q.Continue = info.File == "" || info.Kind == agentfile.KindPipeline || IsNull(k.Input) || k.CheckpointID != "" || th.Head == 0 || s.Busy(ctx, th.ID)
	_, err := agentfile.CheckStart(ctx, s.store, q)
	se, ok := errors.AsType[*agentfile.StartError](err)
	switch {
	case !ok:
		return err
	case errors.Is(se.Err, agentfile.ErrUnfinished):
		return newError(ErrUnfinished, "thread %q has an unfinished run (checkpoint %s, %s): resume it with a command (or no input), or start over with multitask_strategy interrupt",
			APIThreadID(th.ID), CheckpointID(se.Head.Seq), strings.ToLower(se.Head.Status.String()))
	}
	return newError(agentfile.ErrOtherFile, "thread %q runs %s, not assistant %q", APIThreadID(th.ID), se.File, info.ID)
}

// ThreadMetadata is the metadata a thread of assistant a carries, so that
// the server and the CLI know what runs on it.
func (s *Service) ThreadMetadata(md map[string]any, a Assistant, assistantID string) map[string]any {
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
	set("assistant_id", cmp.Or(assistantID, info.ID))
	if info.File != "" {
		set(agentfile.MetaKind, info.Kind)
		set(agentfile.MetaFile, info.File)
	}
	return out
}

// adoptThread records the assistant in the thread's metadata when it names
// none (mayStart has checked that the thread may take it).
func (s *Service) adoptThread(ctx context.Context, th *store.Thread, a Assistant, assistantID string) error {
	md := s.ThreadMetadata(th.Metadata, a, assistantID)
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
func (m *runManager) spec(ctx context.Context, lr *Run) (RunSpec, error) {
	k := lr.data.Kwargs
	spec := RunSpec{Store: m.s.store, Thread: lr.rec.Thread, RunID: lr.rec.ID, Input: k.Input, InterruptBefore: k.InterruptBefore, InterruptAfter: k.InterruptAfter,
		Durability: flow.Durability(k.Durability), Stream: flow.StreamOptions{Modes: flowModes(k.StreamMode), Subgraphs: k.StreamSubgraphs}, Inbox: m.s.flowInbox()}
	if k.Config != nil {
		spec.RecursionLimit = k.Config.RecursionLimit
	}
	spec.Abandon = lr.data.MultitaskStrategy == "interrupt" || lr.data.MultitaskStrategy == "rollback"
	if lr.started {
		spec.Resume = true
	} else if k.CheckpointID != "" {
		at, _ := ParseCheckpointID(k.CheckpointID) // checked when the run was created
		seq, err := m.runFrom(ctx, lr.rec.Thread, at, IsNull(k.Input))
		if err != nil {
			return spec, err
		}
		if err := m.forkAt(ctx, lr.rec.Thread, seq); err != nil {
			return spec, err
		}
		spec.Resume = IsNull(k.Input)
	} else if IsNull(k.Input) {
		head, err := m.s.store.Load(ctx, store.LoadRequest{Thread: lr.rec.Thread})
		spec.Resume = err == nil && agentfile.Unfinished(head)
	}
	if k.Approval != nil {
		spec.Resume, spec.Answer = true, *k.Approval
	}
	if c := k.Command; c != nil {
		spec.Resume = true
		if !IsNull(c.Update) && !lr.started {
			if err := m.applyUpdate(ctx, lr, c.Update); err != nil {
				return spec, err
			}
		}
		if !IsNull(c.Goto) { // checked: "__end__"
			return spec, m.endThread(ctx, lr.rec.Thread)
		}
		if !IsNull(c.Resume) {
			var v any
			if err := json.Unmarshal(c.Resume, &v); err != nil {
				return spec, invalid("$.command.resume", "%v", err)
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

// IsNull reports whether a JSON value is absent or null.
func IsNull(b json.RawMessage) bool {
	s := strings.TrimSpace(string(b))
	return s == "" || s == "null"
}

// forkAt makes checkpoint seq the thread's head (a new branch), for a run
// from that checkpoint.
// runFrom is the checkpoint a run from checkpoint at starts from. From
// the input view before a run's input checkpoint, a run without input
// runs that input again (from the input checkpoint itself, as LangGraph
// runs the pending input); with input, it starts from the state before.
func (m *runManager) runFrom(ctx context.Context, thread string, at CheckpointAt, noInput bool) (int64, error) {
	if at.Input && noInput {
		_, err := m.s.InputOf(ctx, thread, "", at.Seq)
		return at.Seq, err
	}
	return m.s.StateAt(ctx, thread, "", at)
}

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
