package runs

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// StateView is a checkpoint as the API shows a thread state.
func StateView(cp store.Checkpoint) State {
	v := State{Values: json.RawMessage("{}"), Next: []string{}, Tasks: []Task{}, Checkpoint: NewCheckpointRef(cp.Thread, cp.Namespace, cp.Seq),
		Metadata: CheckpointMetadata(cp), Interrupts: []Interrupt{}}
	if cp.HasState {
		v.Values = cp.State.AppendJSON(nil)
	}
	created := APITime(cp.CreatedAt)
	v.CreatedAt = &created
	if cp.Parent > 0 {
		p := NewCheckpointRef(cp.Thread, cp.Namespace, cp.Parent)
		v.ParentCheckpoint = &p
	}
	next := cp.Meta.Next
	for i, n := range next {
		t := Task{ID: TaskID(cp, n, i), Name: n, Interrupts: []Interrupt{}}
		v.Tasks = append(v.Tasks, t)
	}
	v.Next = append(v.Next, next...)
	if cp.Status == store.StatusFailed && cp.Meta.Error != "" {
		msg := cp.Meta.Error
		for i := range v.Tasks {
			v.Tasks[i].Error = &msg
		}
	}
	if in := InterruptOf(cp); in != nil {
		v.Interrupts = []Interrupt{*in}
		node := InterruptNode(cp)
		placed := false
		for i := range v.Tasks {
			if v.Tasks[i].Name == node && !placed {
				v.Tasks[i].Interrupts = v.Interrupts
				placed = true
			}
		}
		if !placed {
			v.Tasks = append(v.Tasks, Task{ID: TaskID(cp, node, len(next)), Name: node, Interrupts: v.Interrupts})
		}
	}
	return v
}

// InterruptOf is the pending interrupt of a checkpoint that stopped for
// one, as LangGraph shows it (nil otherwise): the value a node passed to
// interrupt(). A pause of interrupt_before or interrupt_after has none —
// LangGraph shows such a thread by its next node alone.
func InterruptOf(cp store.Checkpoint) *Interrupt {
	in, static := PauseOf(cp)
	if static {
		return nil
	}
	return in
}

// PauseOf is the pause of a checkpoint that stopped (nil otherwise), as
// Cairn's approvals show it: a node's interrupt with its value, or a
// static pause (static true) whose value names the node.
func PauseOf(cp store.Checkpoint) (in *Interrupt, static bool) {
	if cp.Status != store.StatusInterrupted && cp.Meta.StopReason != string(state.StopInterrupt) {
		return nil, false
	}
	var p struct {
		Value *json.RawMessage `json:"value"` // a node's interrupt: {node, value}
	}
	val := cp.Meta.Interrupt
	if json.Unmarshal(val, &p) == nil && p.Value != nil {
		val = *p.Value
	} else if len(val) > 0 {
		static = true // {before|after, node}
	}
	if len(val) == 0 {
		val = json.RawMessage("null")
	}
	in = &Interrupt{ID: InterruptID(cp.Thread, cp.Namespace, cp.Seq), Value: val, When: "during"}
	if cp.Namespace != "" {
		in.NS = []string{APINamespace(cp.Namespace)}
	}
	return in, static
}

// InterruptNode is the node an interrupt stopped at.
func InterruptNode(cp store.Checkpoint) string {
	var p struct {
		Node string `json:"node"`
	}
	if json.Unmarshal(cp.Meta.Interrupt, &p) == nil && p.Node != "" {
		return p.Node
	}
	if len(cp.Nodes) == 1 {
		return cp.Nodes[0]
	}
	if len(cp.Meta.Next) > 0 {
		return cp.Meta.Next[0]
	}
	return "__interrupt__"
}

func TaskID(cp store.Checkpoint, node string, i int) string {
	return InterruptID(cp.Thread, cp.Namespace+"/"+node+"/"+strconv.Itoa(i), cp.Seq)
}

// CheckpointMetadata is a checkpoint's metadata in LangGraph's terms
// (source, step, run_id, parents) with Cairn's own under "cairn".
func CheckpointMetadata(cp store.Checkpoint) map[string]any {
	src := cp.Meta.Source
	switch src {
	case "", "interrupt":
		src = "loop"
	}
	cairn := map[string]any{"seq": cp.Seq, "parent": cp.Parent, "status": cp.Status.String(), "nodes": cp.Nodes}
	add := func(k string, v any, ok bool) {
		if ok {
			cairn[k] = v
		}
	}
	m := cp.Meta
	add("tokens", m.Tokens, m.Tokens != nil)
	add("duration_ms", m.DurationMS, len(m.DurationMS) > 0)
	add("stop_reason", m.StopReason, m.StopReason != "")
	add("error", m.Error, m.Error != "")
	add("score", m.Score, m.Score != nil)
	add("usage", m.Usage, m.Usage != nil)
	if f := m.ForkedFrom; f != nil {
		add("forked_from", store.Ref{Thread: APIThreadID(f.Thread), Namespace: f.Namespace, Seq: f.Seq}, true)
	}
	approval, ok := m.Extra[flow.ApprovalKey]
	add("approval", approval, ok)
	md := map[string]any{"source": src, "step": cp.Seq - 2, "parents": map[string]any{}, "writes": nil, "thread_id": APIThreadID(cp.Thread), "cairn": cairn}
	if m.RunID != "" {
		md["run_id"] = m.RunID
	}
	return md
}

// ThreadAssistant is the assistant a thread runs: the one its metadata
// names, else the one of its latest run.
func (s *Service) ThreadAssistant(ctx context.Context, th store.Thread) (Assistant, error) {
	for _, k := range []string{"assistant_id", "graph_id"} {
		if id, ok := th.Metadata[k].(string); ok {
			if a, ok := s.assistants[id]; ok {
				return a, nil
			}
		}
	}
	recs, err := s.runlog.Runs(ctx, store.RunQuery{Tenant: TenantOf(ctx), Thread: th.ID, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(recs) > 0 {
		var d Data
		if err := json.Unmarshal(recs[0].Data, &d); err == nil {
			if a, ok := s.assistants[d.Graph()]; ok {
				return a, nil
			}
		}
	}
	return nil, newError(ErrState, "thread %q names no assistant (metadata graph_id) and has no run; start a run first", APIThreadID(th.ID))
}
