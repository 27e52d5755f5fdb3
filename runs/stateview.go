package runs

import (
	"context"
	"encoding/json"
	"maps"
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
	if RunInput(cp) {
		p := inputRef(cp)
		v.ParentCheckpoint = &p
	} else if cp.Parent > 0 {
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
	if _, static := PauseOf(cp); static {
		node := InterruptNode(cp)
		for i := range v.Tasks {
			if v.Tasks[i].Name == node {
				v.Tasks[i].Checkpoint = subgraphRef(cp, node) // a subgraph paused inside: its own state is there
				break
			}
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
	in = &Interrupt{ID: InterruptID(cp.Thread, cp.Namespace, cp.Seq), Value: val, When: "during", ResponseSchema: flow.ResponseSchemaOf(cp)}
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
// (source, step, run_id, parents) with Cairn's own under "cairn" (its
// source too). A run's input checkpoint is LangGraph's first "loop" one,
// step 0 of a thread's first run: its input view (InputView) is the
// "input" one before it.
func CheckpointMetadata(cp store.Checkpoint) map[string]any {
	src := cp.Meta.Source
	switch src {
	case "", "interrupt", sourceInput:
		src = "loop"
	}
	cairn := map[string]any{"seq": cp.Seq, "parent": cp.Parent, "status": cp.Status.String(), "nodes": cp.Nodes, "source": cp.Meta.Source}
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
	md := map[string]any{"source": src, "step": cp.Seq - 1, "parents": map[string]any{}, "writes": nil, "thread_id": APIThreadID(cp.Thread), "cairn": cairn}
	if m.RunID != "" {
		md["run_id"] = m.RunID
	}
	return md
}

// ThreadAssistant is the assistant a thread runs: the one its metadata
// names (by id, else by the file cairn run recorded), else the one of its
// latest run.
func (s *Service) ThreadAssistant(ctx context.Context, th store.Thread) (Assistant, error) {
	for _, k := range []string{"assistant_id", "graph_id"} {
		if id, ok := th.Metadata[k].(string); ok {
			if a, ok := s.assistants[id]; ok {
				return a, nil
			}
		}
	}
	if file, ok := th.Metadata["file"].(string); ok && file != "" {
		for _, id := range s.order {
			if a := s.assistants[id]; a.Info().File == file {
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

// RunMetadata returns a lookup of what a thread's runs add to the
// metadata of the checkpoints they wrote, as LangGraph's checkpoints
// carry their run's: its assistant_id and graph_id, its config.metadata
// and its request's metadata (which wins), also on a copy of the thread
// the run ran on. A checkpoint's run is the one
// RunOfCheckpoint finds; each run is read once; a run whose record is
// gone adds nothing.
func (s *Service) RunMetadata(ctx context.Context, th store.Thread, ns string) func(cp store.Checkpoint) map[string]any {
	seen := map[string]map[string]any{}
	runOf := s.checkpointRuns(ctx, th.ID, ns)
	return func(cp store.Checkpoint) map[string]any {
		id := runOf(cp)
		if md, ok := seen[id]; ok || id == "" {
			return md
		}
		var md map[string]any
		// The run may be another thread's of the tenant: a copy's
		// checkpoints were written by the source's runs.
		if rec, err := s.runlog.Run(ctx, id); err == nil && rec.Tenant == TenantOf(ctx) {
			if d, err := DataOf(rec); err == nil {
				md = map[string]any{"run_id": id, "assistant_id": d.AssistantID, "graph_id": d.Graph()}
				if c := d.Kwargs.Config; c != nil {
					maps.Copy(md, c.Metadata)
				}
				maps.Copy(md, d.Metadata)
			}
		}
		seen[id] = md
		return md
	}
}

// runMarkEvery bounds how far back a checkpoint's run is named: the
// runner names it on a run's first checkpoint, where it stops, and every
// 256 steps (flow's runStartEvery).
const runMarkEvery = 256

// checkpointRuns returns a lookup of the run that wrote a checkpoint: the
// run it names, else the one its nearest ancestor names (walking parent
// links, at most runMarkEvery steps back); none for a checkpoint an
// outside update or a fork wrote. What a walk learns is kept, so a page
// of history walks once.
func (s *Service) checkpointRuns(ctx context.Context, thread, ns string) func(cp store.Checkpoint) string {
	known := map[int64]string{}
	outside := func(cp store.Checkpoint) bool { return cp.Meta.Source == "update" || cp.Meta.Source == "fork" }
	return func(cp store.Checkpoint) string {
		if id, ok := known[cp.Seq]; ok {
			return id
		}
		if cp.Meta.RunID != "" || outside(cp) || cp.Parent == 0 {
			known[cp.Seq] = cp.Meta.RunID
			return cp.Meta.RunID
		}
		path, want, id := []int64{cp.Seq}, cp.Parent, ""
		for c, err := range s.store.History(ctx, store.HistoryRequest{Thread: thread, Namespace: ns, Before: cp.Seq}) {
			if err != nil || len(path) > runMarkEvery+1 {
				break
			}
			if c.Seq != want {
				continue // another branch
			}
			if v, ok := known[c.Seq]; ok {
				id = v
				break
			}
			if c.Meta.RunID != "" || outside(c) {
				id = c.Meta.RunID
				break
			}
			path, want = append(path, c.Seq), c.Parent
			if want == 0 {
				break
			}
		}
		for _, p := range path {
			known[p] = id
		}
		return id
	}
}

// AddRunMetadata adds to a state's metadata the members of its run's it
// lacks (the checkpoint's own keys win).
func (v *State) AddRunMetadata(md map[string]any) {
	for k, x := range md {
		if _, ok := v.Metadata[k]; !ok {
			v.Metadata[k] = x
		}
	}
}
