package difftest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// stats counts what programs did, for the soak figure.
type stats struct {
	Programs    int64 // programs run
	Steps       int64 // steps the runner committed (SUCCESS, FAILED, INTERRUPTED)
	Checkpoints int64 // checkpoints written: steps, inputs, forks, updates
	Compared    int64 // state comparisons made (memory, store, fresh process, model)
	Forks       int64 // forks from old checkpoints (RunFrom, UpdateStateAt)
	Prunes      int64
	Copies      int64
	Rekeys      int64
	Rebuilds    int64 // fresh-process rebuilds
	Memory      int64 // states the runner held in memory, compared with the store
	Interrupted int64 // INTERRUPTED checkpoints (then answered by a resume)
	Failed      int64 // FAILED checkpoints (parallel removals of one message)
}

func (s *stats) add(o stats) {
	s.Programs += o.Programs
	s.Steps += o.Steps
	s.Checkpoints += o.Checkpoints
	s.Compared += o.Compared
	s.Forks += o.Forks
	s.Prunes += o.Prunes
	s.Copies += o.Copies
	s.Rekeys += o.Rekeys
	s.Rebuilds += o.Rebuilds
	s.Memory += o.Memory
	s.Interrupted += o.Interrupted
	s.Failed += o.Failed
}

// memState is a state the runner held in memory (a values event, or the
// checkpoint UpdateState returned).
type memState struct {
	thread, ns string
	seq        int64
	state      string
}

// harness runs one generated program against one store and checks it.
type harness struct {
	t       testing.TB
	ctx     context.Context
	src     *source
	be      *backend
	s       *store.Engine
	keys    [][]byte // newest first; none: no encryption
	sopts   store.Options
	dur     flow.Durability
	sc      script
	g       *flow.Compiled
	r       *flow.Runner
	thread  string
	threads []string
	cps     map[string]map[int64]mcp // the model's checkpoints, per thread
	head    map[string]int64
	mem     []memState
	n       int // names answers, keys and copies
	st      stats
}

func (h *harness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("%s: "+format, append([]any{h.be.name}, args...)...)
}

// openStore (re)opens the store with the harness's keys and a runner on it.
func (h *harness) openStore() {
	h.t.Helper()
	o := h.sopts
	o.Keyring = ringOf(h.keys)
	s, err := h.be.open(h.ctx, o)
	if err != nil {
		h.fatalf("open: %v", err)
	}
	h.s = s
	if h.r, err = flow.NewRunner(h.g, s, flow.Options{Durability: h.dur, RecursionLimit: -1}); err != nil {
		h.fatalf("runner: %v", err)
	}
}

func (h *harness) closeStore() {
	h.t.Helper()
	if err := h.s.Close(); err != nil {
		h.fatalf("close: %v", err)
	}
}

var streamOpts = flow.StreamOptions{Modes: []flow.StreamMode{flow.StreamValues}, Subgraphs: true}

// drain runs a stream, keeping the states the runner held in memory.
func (h *harness) drain(events iter.Seq2[flow.Event, error]) (flow.Result, error) {
	var res flow.Result
	var runErr error
	for ev, err := range events {
		if ev.Kind == flow.EventValues && ev.State != nil {
			st, cerr := canonJSON([]byte(ev.State.String()))
			if cerr != nil {
				h.fatalf("values event: %v", cerr)
			}
			h.mem = append(h.mem, memState{thread: ev.Thread, ns: ev.Namespace, seq: ev.Seq, state: st})
		}
		if ev.Kind == flow.EventResult {
			if ev.Result != nil {
				res = *ev.Result
			}
			runErr = err
		}
	}
	return res, runErr
}

// load returns a stored checkpoint's status and canonical state.
func (h *harness) load(thread, ns string, seq int64) (store.Checkpoint, string, error) {
	cp, err := h.s.Load(h.ctx, store.LoadRequest{Thread: thread, Namespace: ns, Seq: seq})
	if err != nil {
		return cp, "", err
	}
	st, err := canonJSON([]byte(cp.State.String()))
	if err != nil {
		h.fatalf("checkpoint %s %q %d: %v", thread, ns, seq, err)
	}
	return cp, st, nil
}

// checkMemory compares every state the runner held in memory since the
// last check with the state loaded from the store.
func (h *harness) checkMemory() {
	h.t.Helper()
	for _, m := range h.mem {
		_, st, err := h.load(m.thread, m.ns, m.seq)
		if err != nil {
			h.fatalf("load %s %q %d the runner held: %v", m.thread, m.ns, m.seq, err)
		}
		if st != m.state {
			h.fatalf("checkpoint %s %q %d: in memory %s, loaded %s", m.thread, m.ns, m.seq, m.state, st)
		}
		h.st.Compared++
		h.st.Memory++
	}
	h.mem = h.mem[:0]
}

// settle finds the checkpoints an operation wrote on the thread (the
// stored ones the model does not know) and checks them against the
// model's prediction: their number, parents, statuses and states.
func (h *harness) settle(parent int64, pred []mcp, res *flow.Result, runErr error) {
	h.t.Helper()
	known := h.cps[h.thread]
	var fresh []store.Checkpoint
	// A new checkpoint takes the next seq: the newest ones are the
	// operation's, and two more show any the model does not expect.
	for cp, err := range h.s.History(h.ctx, store.HistoryRequest{Thread: h.thread, Limit: len(pred) + 2}) {
		if err != nil {
			h.fatalf("history: %v", err)
		}
		if _, ok := known[cp.Seq]; !ok {
			fresh = append(fresh, cp)
		}
	}
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].Seq < fresh[j].Seq })
	wantErr := len(pred) > 0 && pred[len(pred)-1].status == stFailed
	if (runErr != nil) != wantErr {
		h.fatalf("run error %v; the model predicts %d checkpoints ending %v", runErr, len(pred), statuses(pred))
	}
	if len(fresh) != len(pred) {
		h.fatalf("the operation wrote %d checkpoints %v; the model predicts %d %v", len(fresh), seqs(fresh), len(pred), statuses(pred))
	}
	for i, cp := range fresh {
		if cp.Parent != parent {
			h.fatalf("checkpoint %d has parent %d, want %d", cp.Seq, cp.Parent, parent)
		}
		got, st, err := h.load(h.thread, "", cp.Seq)
		if err != nil {
			h.fatalf("load %d: %v", cp.Seq, err)
		}
		if want := canon(pred[i].state); st != want || got.Status.String() != pred[i].status {
			h.fatalf("checkpoint %d (%d of %d, parent %d): stored %s %s; the model has %s %s", cp.Seq, i+1, len(pred), parent, got.Status, st, pred[i].status, want)
		}
		known[cp.Seq] = pred[i]
		switch pred[i].status {
		case stInterrupted:
			h.st.Interrupted++
		case stFailed:
			h.st.Failed++
		}
		parent = cp.Seq
		h.st.Compared++
		h.st.Checkpoints++
	}
	if len(fresh) > 0 {
		h.head[h.thread] = parent
	}
	if res != nil && len(pred) > 0 && runErr == nil {
		st, err := canonJSON([]byte(res.State.String()))
		if err != nil || st != canon(pred[len(pred)-1].state) {
			h.fatalf("the run ended holding %s; the model has %s", st, canon(pred[len(pred)-1].state))
		}
	}
	h.checkMemory()
}

func statuses(p []mcp) []string {
	out := make([]string, len(p))
	for i, c := range p {
		out[i] = c.status
	}
	return out
}

func seqs(cps []store.Checkpoint) []int64 {
	out := make([]int64, len(cps))
	for i, c := range cps {
		out[i] = c.Seq
	}
	return out
}

// verifyAll loads every checkpoint the model knows on the threads and
// compares it; a checkpoint a prune removed is dropped from the model
// when pruned is set, else its absence is a failure.
func (h *harness) verifyAll(pruned bool, threads ...string) {
	h.t.Helper()
	for _, th := range threads {
		for _, seq := range slices.Sorted(maps.Keys(h.cps[th])) {
			want := h.cps[th][seq]
			cp, st, err := h.load(th, "", seq)
			if pruned && errors.Is(err, store.ErrNotFound) && seq != h.head[th] {
				delete(h.cps[th], seq)
				continue
			}
			if err != nil {
				h.fatalf("load %s %d: %v", th, seq, err)
			}
			if st != canon(want.state) || cp.Status.String() != want.status {
				h.fatalf("checkpoint %s %d: stored %s %s; the model has %s %s", th, seq, cp.Status, st, want.status, canon(want.state))
			}
			h.st.Compared++
		}
	}
}

// rebuildCheck closes the store, has a fresh process rebuild every
// checkpoint of every thread and namespace, and compares what it prints
// with what this process loads and with the model; then reopens.
func (h *harness) rebuildCheck() {
	h.t.Helper()
	here, err := dump(h.ctx, h.s, h.threads)
	if err != nil {
		h.fatalf("dump: %v", err)
	}
	h.closeStore()
	fresh, err := rebuild(h.ctx, h.be, h.keys, h.threads)
	if err != nil {
		h.fatalf("%v", err)
	}
	h.st.Rebuilds++
	for k, v := range here {
		if fresh[k] != v {
			h.fatalf("checkpoint %s: this process rebuilds %s; a fresh process %q", k, v, fresh[k])
		}
		h.st.Compared++
	}
	if len(fresh) != len(here) {
		h.fatalf("a fresh process rebuilds %d checkpoints, this process %d", len(fresh), len(here))
	}
	for _, th := range h.threads {
		for seq, want := range h.cps[th] {
			got, ok := here[fmt.Sprintf("%s  %d", th, seq)] // the root namespace is ""
			if !ok || !strings.HasPrefix(got, want.status+" ") || !strings.HasSuffix(got, " "+canon(want.state)) {
				h.fatalf("checkpoint %s %d: rebuilt %q; the model has %s %s", th, seq, got, want.status, canon(want.state))
			}
			h.st.Compared++
		}
	}
	h.openStore()
}

// update is an UpdateState or UpdateStateAt: the returned checkpoint's
// state is what the runner held, the model predicts the rest.
func (h *harness) update(at int64, onHead bool, upd state.Update, asNode string, pred mcp) {
	h.t.Helper()
	var cp store.Checkpoint
	var err error
	if onHead {
		cp, err = h.r.UpdateState(h.ctx, h.thread, upd, asNode)
	} else {
		cp, err = h.r.UpdateStateAt(h.ctx, h.thread, at, upd, asNode)
	}
	if err != nil {
		h.fatalf("update at %d as %s: %v", at, asNode, err)
	}
	st, err := canonJSON([]byte(cp.State.String()))
	if err != nil {
		h.fatalf("update: %v", err)
	}
	h.mem = append(h.mem, memState{thread: h.thread, seq: cp.Seq, state: st})
	h.settle(at, []mcp{pred}, nil, nil)
}
