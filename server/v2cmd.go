package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/runs"
)

// v2Modes are what a run made through the protocol logs: every channel
// its events are made from (runs.V2Stream).
var v2Modes = runs.StringList{"values", "updates", "messages-tuple", "custom", "tasks", "checkpoints"}

// v2Params decodes a command's params; fields it does not name are let
// through (the protocol's params are extensible), values of the wrong
// type are an error at their path.
func v2Params(raw json.RawMessage, v any) error {
	if runs.IsNull(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return unprocessable("$.params."+te.Field, "want %s, got a JSON %s", friendlyType(te.Type), te.Value)
		}
		return unprocessable("$.params", "%v", err)
	}
	return nil
}

// v2StartParams are run.start's params.
type v2StartParams struct {
	AssistantID string          `json:"assistant_id"`
	Input       json.RawMessage `json:"input"`
	Config      *runs.RunConfig `json:"config"`
	Context     json.RawMessage `json:"context"`
	Metadata    map[string]any  `json:"metadata"`
	// The SDK sends multitaskStrategy; the HTTP API's spelling is taken too.
	Strategy  string `json:"multitaskStrategy"`
	Strategy2 string `json:"multitask_strategy"`
}

// v2Start starts a run on the thread (made if it does not exist): new
// input, or, while the thread waits at an interrupt, the answer to it
// (as LangGraph's server reads input sent then). A checkpoint_id in the
// config's configurable runs from that checkpoint.
func (s *Server) v2Start(ctx context.Context, thread string, raw json.RawMessage) (any, int64, error) {
	var p v2StartParams
	if err := v2Params(raw, &p); err != nil {
		return nil, 0, err
	}
	if p.AssistantID == "" {
		return nil, 0, v2Errorf("invalid_argument", "run.start needs an assistant_id")
	}
	q := runs.Request{AssistantID: p.AssistantID, Input: p.Input, Config: p.Config, Context: p.Context, Metadata: p.Metadata,
		IfNotExists: "create", MultitaskStrategy: cmp.Or(p.Strategy, p.Strategy2, "enqueue")}
	if runs.IsNull(p.Input) && (p.Config == nil || p.Config.Configurable["checkpoint_id"] == nil) {
		if err := s.v2Continues(ctx, thread); err != nil {
			return nil, 0, err
		}
	} else if !runs.IsNull(p.Input) {
		if pending, err := s.v2Pending(ctx, thread); err != nil {
			return nil, 0, err
		} else if pending != nil {
			q.Input, q.Command = nil, &runs.Command{Resume: p.Input}
		}
	}
	return s.v2Create(ctx, thread, q)
}

// v2Continues refuses a run without input that would run no node (a run
// never reports success having done nothing): the thread must have a
// step to take.
func (s *Server) v2Continues(ctx context.Context, thread string) error {
	v, err := s.stateOf(ctx, thread, "", "", false)
	if errors.Is(err, runs.ErrNotFound) {
		return unprocessable("$.params.input", "thread %s is new: its first run needs input", thread)
	}
	if err != nil {
		return err
	}
	st, err := asV2State(v)
	if err != nil {
		return err
	}
	if len(st.Next) == 0 {
		return unprocessable("$.params.input", "thread %s is at its end: a run without input would run no step", thread)
	}
	return nil
}

// v2Create makes a run the protocol streams: its id, and the seq before
// its first event.
func (s *Server) v2Create(ctx context.Context, thread string, q runs.Request) (any, int64, error) {
	q.StreamMode, q.StreamSubgraphs, q.StreamResumable = v2Modes, true, true
	lr, err := s.svc.Create(ctx, thread, q)
	if err != nil {
		return nil, 0, err
	}
	rec := lr.Record()
	d, err := runs.DataOf(rec)
	if err != nil {
		return nil, 0, err
	}
	return map[string]any{"run_id": rec.ID, "thread_id": runs.APIThreadID(rec.Thread)}, runs.V2SeqBase(d.Ordinal), nil
}

// v2Pending is the thread's pending interrupt (nil: none, or no thread).
func (s *Server) v2Pending(ctx context.Context, thread string) (*runs.Pending, error) {
	th, err := s.svc.Thread(ctx, thread)
	if errors.Is(err, runs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p, _, err := s.svc.PendingOf(ctx, th)
	return p, err
}

// v2RespondParams are input.respond's: one answer, or several.
type v2RespondParams struct {
	v2Answer
	Responses []v2Answer      `json:"responses"`
	Update    json.RawMessage `json:"update"`
	Goto      json.RawMessage `json:"goto"`
	Config    *runs.RunConfig `json:"config"`
	Metadata  map[string]any  `json:"metadata"`
}

// v2Answer answers an interrupt.
type v2Answer struct {
	Namespace   []string        `json:"namespace"`
	InterruptID string          `json:"interrupt_id"`
	Response    json.RawMessage `json:"response"`
}

// v2Respond answers the thread's pending interrupt with a run that
// resumes it. An answer that comes while the run that will ask is still
// on its way waits for the question (up to v2AnswerWait).
func (s *Server) v2Respond(ctx context.Context, thread string, raw json.RawMessage) (any, int64, error) {
	var p v2RespondParams
	if err := v2Params(raw, &p); err != nil {
		return nil, 0, err
	}
	answers := p.Responses
	if len(answers) == 0 && p.InterruptID != "" {
		answers = []v2Answer{p.v2Answer}
	}
	if len(answers) == 0 {
		return nil, 0, v2Errorf("invalid_argument", "input.respond needs an interrupt_id and a response, or responses")
	}
	for i, a := range answers {
		if a.InterruptID == "" {
			return nil, 0, unprocessable(fmt.Sprintf("$.params.responses[%d].interrupt_id", i), "each answer names its interrupt")
		}
	}
	pending, err := s.v2AwaitPending(ctx, thread)
	if err != nil {
		return nil, 0, err
	}
	resume := answers[0].Response
	if len(answers) > 1 {
		m := map[string]json.RawMessage{}
		for _, a := range answers {
			m[a.InterruptID] = a.Response
		}
		resume, _ = json.Marshal(m) // raw JSON values always marshal
	}
	for _, a := range answers {
		if a.InterruptID != pending.InterruptID {
			return nil, 0, v2Errorf("no_such_interrupt", "interrupt %q is not pending on thread %s (%s is)", a.InterruptID, thread, pending.InterruptID)
		}
	}
	assistant, err := s.v2Assistant(ctx, thread)
	if err != nil {
		return nil, 0, err
	}
	q := runs.Request{AssistantID: assistant, Command: &runs.Command{Resume: resume, Update: p.Update, Goto: p.Goto},
		Config: p.Config, Metadata: p.Metadata, MultitaskStrategy: "enqueue"}
	_, through, err := s.v2Create(ctx, thread, q)
	return map[string]any{}, through, err
}

// v2AnswerWait bounds how long an answer waits for its question.
const v2AnswerWait = 30 * time.Second

// v2AwaitPending is the thread's pending interrupt, waiting for it while
// a run on the thread may still ask.
func (s *Server) v2AwaitPending(ctx context.Context, thread string) (*runs.Pending, error) {
	deadline := time.Now().Add(v2AnswerWait)
	for {
		th, err := s.svc.Thread(ctx, thread)
		if err != nil {
			return nil, v2Errorf("no_such_run", "thread %s has no run to answer", thread)
		}
		p, _, err := s.svc.PendingOf(ctx, th)
		if err != nil || p != nil {
			return p, err
		}
		if !s.svc.Busy(ctx, th.ID) || time.Now().After(deadline) {
			return nil, v2Errorf("no_such_interrupt", "thread %s waits for no answer", thread)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// v2Assistant is the assistant of the thread's newest run.
func (s *Server) v2Assistant(ctx context.Context, thread string) (string, error) {
	th, err := s.svc.Thread(ctx, thread)
	if err != nil {
		return "", err
	}
	recs, err := s.svc.Runs(ctx, th, "", 1, 0)
	if err != nil {
		return "", err
	}
	if len(recs) == 0 {
		return "", v2Errorf("no_such_run", "thread %s has had no run: run.start first", thread)
	}
	d, err := runs.DataOf(recs[0])
	return d.AssistantID, err
}

// v2Inject adds a message to the thread's conversation: to its running
// run's, taken at its next model call, when it has one that takes
// steering (v2Steer); otherwise a run with it as
// input, after the runs already on the thread.
func (s *Server) v2Inject(ctx context.Context, thread string, raw json.RawMessage) (any, int64, error) {
	var p struct {
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
			Name    string `json:"name"`
		} `json:"message"`
	}
	if err := v2Params(raw, &p); err != nil {
		return nil, 0, err
	}
	typ := map[string]string{"user": "human", "system": "system"}[p.Message.Role]
	if typ == "" {
		return nil, 0, unprocessable("$.params.message.role", "%q: want user or system", p.Message.Role)
	}
	assistant, err := s.v2Assistant(ctx, thread)
	if err != nil {
		return nil, 0, err
	}
	msg := map[string]any{"type": typ, "content": p.Message.Content}
	if p.Message.Name != "" {
		msg["name"] = p.Message.Name
	}
	if steered, err := s.v2Steer(ctx, thread, msg); steered || err != nil {
		return map[string]any{}, 0, err
	}
	input, _ := json.Marshal(map[string]any{"messages": []any{msg}}) // strings always marshal
	_, through, err := s.v2Create(ctx, thread, runs.Request{AssistantID: assistant, Input: input, MultitaskStrategy: "enqueue"})
	return map[string]any{}, through, err
}

// v2Steer steers the thread's running run with msg when it has one whose
// assistant takes steering (Cairn: the run takes it at its next model
// call, docs/steering.md); it reports whether it did.
func (s *Server) v2Steer(ctx context.Context, thread string, msg map[string]any) (bool, error) {
	th, err := s.svc.Thread(ctx, thread)
	if err != nil || !s.svc.Busy(ctx, th.ID) {
		return false, nil // no thread yet, or idle: a run of its own
	}
	a, err := s.svc.ThreadAssistant(ctx, th)
	if err != nil || runs.Steerable(a) != nil {
		return false, nil
	}
	b, _ := json.Marshal(msg) // strings always marshal
	_, err = s.svc.Steer(ctx, thread, b, false)
	return err == nil, err
}

// v2StateOf reads a thread state's fields the protocol shows.
type v2StateOf struct {
	Values     map[string]json.RawMessage `json:"values"`
	Checkpoint struct {
		ID string `json:"checkpoint_id"`
		NS string `json:"checkpoint_ns"`
	} `json:"checkpoint"`
	CreatedAt string         `json:"created_at"`
	Metadata  map[string]any `json:"metadata"`
	Next      []string       `json:"next"`
}

func asV2State(v any) (v2StateOf, error) {
	var st v2StateOf
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	return st, err
}

// v2State is state.get: the thread's values at its head (of a
// namespace), only keys when named, and the checkpoint they are at.
func (s *Server) v2State(ctx context.Context, thread string, raw json.RawMessage) (any, error) {
	var p struct {
		Namespace []string `json:"namespace"`
		Keys      []string `json:"keys"`
	}
	if err := v2Params(raw, &p); err != nil {
		return nil, err
	}
	v, err := s.stateOf(ctx, thread, runs.CairnNamespace(strings.Join(p.Namespace, "|")), "", false)
	if err != nil {
		return nil, err
	}
	st, err := asV2State(v)
	if err != nil {
		return nil, err
	}
	values := st.Values
	if p.Keys != nil {
		values = map[string]json.RawMessage{}
		for _, k := range p.Keys {
			if x, ok := st.Values[k]; ok {
				values[k] = x
			}
		}
	}
	out := map[string]any{"values": values}
	if st.Checkpoint.ID != "" {
		cp := map[string]any{"id": st.Checkpoint.ID}
		if st.Checkpoint.NS != "" {
			cp["ns"] = st.Checkpoint.NS
		}
		out["checkpoint"] = cp
	}
	return out, nil
}

// v2Checkpoints is state.listCheckpoints: the thread's checkpoints,
// newest first.
func (s *Server) v2Checkpoints(ctx context.Context, thread string, raw json.RawMessage) (any, error) {
	var p struct {
		Namespace []string `json:"namespace"`
		Limit     *int     `json:"limit"`
		Before    string   `json:"before"`
	}
	if err := v2Params(raw, &p); err != nil {
		return nil, err
	}
	q := historyRequest{Limit: p.Limit, Checkpoint: &runs.CheckpointConfig{CheckpointNS: strings.Join(p.Namespace, "|")}}
	if p.Before != "" {
		q.Before, _ = json.Marshal(p.Before) // a string always marshals
	}
	states, err := s.historyOf(ctx, thread, q)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(states))
	for _, v := range states {
		st, err := asV2State(v)
		if err != nil {
			return nil, err
		}
		step, _ := st.Metadata["step"].(float64)
		c := map[string]any{"id": st.Checkpoint.ID, "timestamp": st.CreatedAt, "step": int64(step), "metadata": st.Metadata}
		if len(st.Next) > 0 {
			c["node_name"] = st.Next[0]
		}
		out = append(out, c)
	}
	return map[string]any{"checkpoints": out}, nil
}

// v2Fork is state.fork: a run on the thread from one of its checkpoints
// (with new input, or the same input again).
func (s *Server) v2Fork(ctx context.Context, thread string, raw json.RawMessage) (any, int64, error) {
	var p struct {
		CheckpointID string          `json:"checkpoint_id"`
		Input        json.RawMessage `json:"input"`
		Config       *runs.RunConfig `json:"config"`
	}
	if err := v2Params(raw, &p); err != nil {
		return nil, 0, err
	}
	if p.CheckpointID == "" {
		return nil, 0, unprocessable("$.params.checkpoint_id", "state.fork needs the checkpoint to run from")
	}
	assistant, err := s.v2Assistant(ctx, thread)
	if err != nil {
		return nil, 0, err
	}
	return s.v2Create(ctx, thread, runs.Request{AssistantID: assistant, Input: p.Input, Config: p.Config,
		CheckpointID: p.CheckpointID, MultitaskStrategy: "enqueue"})
}

// v2Tree is agent.getTree: the thread's root agent and how its newest run
// stands.
func (s *Server) v2Tree(ctx context.Context, thread string) (any, error) {
	th, err := s.svc.Thread(ctx, thread)
	if err != nil {
		return nil, err
	}
	recs, err := s.svc.Runs(ctx, th, "", 1, 0)
	if err != nil {
		return nil, err
	}
	status, graph := "started", ""
	if len(recs) > 0 {
		d, err := runs.DataOf(recs[0])
		if err != nil {
			return nil, err
		}
		graph, status = d.Graph(), v2Status(recs[0].Status)
	}
	if p, _, err := s.svc.PendingOf(ctx, th); err == nil && p != nil {
		status = "interrupted"
	}
	return map[string]any{"tree": map[string]any{"namespace": []string{}, "status": status, "graph_name": graph}}, nil
}

// v2Status is a run status as the protocol names it.
func v2Status(status string) string {
	switch status {
	case runs.StatusSuccess:
		return "completed"
	case runs.StatusError:
		return "failed"
	case runs.StatusInterrupted:
		return "interrupted"
	}
	return "running"
}
