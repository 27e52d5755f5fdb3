package difftest

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// shape bounds a program: its operations after the first run (0: 2 to 13,
// drawn) and its script's steps (0: at most 9).
type shape struct{ ops, scriptSteps int }

// runProgram decodes a program from data — a script, the store's options,
// encryption, durability and the operations — runs it on a new store of
// the kind and checks every checkpoint it writes. It returns what the
// program did.
func runProgram(t testing.TB, kind string, data []byte, sh shape) stats {
	t.Helper()
	src := &source{b: data}
	if sh.scriptSteps == 0 {
		sh.scriptSteps = 9
	}
	h := &harness{t: t, ctx: context.Background(), src: src, sc: genScript(src, sh.scriptSteps), thread: "t0",
		cps: map[string]map[int64]mcp{"t0": {}}, head: map[string]int64{}}
	h.threads = []string{"t0"}
	h.dur = flow.DurabilitySync
	if src.chance(3) {
		h.dur = flow.DurabilityAsync
	}
	if src.chance(2) {
		h.keys = [][]byte{testKey(0)}
	}
	h.sopts = store.Options{
		MinSnapshotBytes: []int64{64, 512, 4096}[src.intn(3)],
		SnapshotRatio:    []float64{0.25, 1, 4}[src.intn(3)],
		SnapshotCache:    []int64{0, -1}[src.intn(2)],
		InlineSnapshots:  src.chance(3),
	}
	var err error
	if h.g, err = buildGraph(h.sc); err != nil {
		t.Fatal(err)
	}
	h.be = newBackend(t, kind)
	h.openStore()
	h.invoke()
	if sh.ops == 0 {
		sh.ops = 2 + src.intn(12)
	}
	for range sh.ops {
		h.op()
	}
	h.verifyAll(false, h.threads...)
	h.rebuildCheck()
	h.closeStore()
	h.st.Programs++
	return h.st
}

// op draws and runs one operation.
func (h *harness) op() {
	h.t.Helper()
	head := h.cps[h.thread][h.head[h.thread]]
	switch c := h.src.intn(20); {
	case c < 4:
		h.invoke()
	case c < 8:
		h.resume(head)
	case c < 11:
		h.runFrom()
	case c < 14:
		h.updateAt()
	case c < 16 && head.status == stSuccess:
		h.updateHead()
	case c < 17:
		h.prune()
	case c < 18:
		h.copyThread()
	case c < 19:
		h.rekey()
	default:
		h.reopen()
	}
}

// writes draws a spec and resolves it against a state, as a node would.
func (h *harness) writes(st mstate) map[string]json.RawMessage {
	h.n++
	return resolve(genSpec(h.src, "x"+strconv.Itoa(h.n)), st.messageIDs())
}

// invoke starts a run with an input: the step counter and some writes.
func (h *harness) invoke() {
	h.t.Helper()
	head := h.head[h.thread]
	base := h.cps[h.thread][head].state
	in := h.writes(base)
	in["step"] = json.RawMessage("0")
	st, err := base.apply(in)
	if err != nil {
		h.fatalf("model: input: %v", err)
	}
	pred := append([]mcp{{state: st, status: stSuccess, sched: schedLead}}, h.sc.run(st, schedLead, nil)...)
	res, runErr := h.drain(h.r.Stream(h.ctx, h.thread, toUpdate(in), streamOpts))
	h.st.Steps += int64(len(pred) - 1)
	h.settle(head, pred, &res, runErr)
}

// resume answers the head's interrupt, or runs what it schedules; a
// failed head fails again the same way, so a new input runs instead.
func (h *harness) resume(head mcp) {
	h.t.Helper()
	if head.status == stFailed {
		h.invoke()
		return
	}
	var value any
	var answer *string
	if head.status == stInterrupted {
		h.n++
		answer = new(string)
		*answer = "v" + strconv.Itoa(h.n)
		value = *answer
	}
	pred := h.sc.run(head.state, head.sched, answer)
	at := h.head[h.thread]
	res, runErr := h.drain(h.r.StreamResume(h.ctx, h.thread, value, streamOpts))
	h.st.Steps += int64(len(pred))
	h.settle(at, pred, &res, runErr)
}

// pickOld draws a completed checkpoint the model knows, old or new.
func (h *harness) pickOld() (int64, mcp, bool) {
	var ok []int64
	for _, seq := range slices.Sorted(maps.Keys(h.cps[h.thread])) {
		if h.cps[h.thread][seq].status == stSuccess {
			ok = append(ok, seq)
		}
	}
	if len(ok) == 0 {
		return 0, mcp{}, false
	}
	seq := ok[h.src.intn(len(ok))]
	return seq, h.cps[h.thread][seq], true
}

// runFrom forks from an old checkpoint with a patch and runs its
// schedule (RunFrom).
func (h *harness) runFrom() {
	h.t.Helper()
	at, from, ok := h.pickOld()
	if !ok {
		h.invoke()
		return
	}
	patch, st := h.genPatch(from.state)
	pred := append([]mcp{{state: st, status: stSuccess, sched: from.sched}}, h.sc.run(st, from.sched, nil)...)
	res, runErr := h.drain(h.r.StreamFrom(h.ctx, h.thread, at, patch, streamOpts))
	h.st.Forks++
	h.st.Steps += int64(len(pred) - 1)
	h.settle(at, pred, &res, runErr)
}

// asNode draws the node an update is written as: "lead" (its router
// schedules the script step the counter names) or "w0" (nothing follows).
func (h *harness) asNode(st mstate) (string, int) {
	if h.src.chance(2) {
		return "w0", schedNone
	}
	return "lead", h.sc.afterLead(st)
}

// updateAt forks from an old checkpoint through the reducers
// (UpdateStateAt).
func (h *harness) updateAt() {
	h.t.Helper()
	at, from, ok := h.pickOld()
	if !ok {
		h.invoke()
		return
	}
	upd := h.writes(from.state)
	st, err := from.state.apply(upd)
	if err != nil {
		h.fatalf("model: update: %v", err)
	}
	node, sched := h.asNode(st)
	h.st.Forks++
	h.update(at, false, toUpdate(upd), node, mcp{state: st, status: stSuccess, sched: sched})
}

// updateHead writes an update on the head as a node (UpdateState).
func (h *harness) updateHead() {
	h.t.Helper()
	at := h.head[h.thread]
	from := h.cps[h.thread][at]
	upd := h.writes(from.state)
	st, err := from.state.apply(upd)
	if err != nil {
		h.fatalf("model: update: %v", err)
	}
	node, sched := h.asNode(st)
	h.update(at, true, toUpdate(upd), node, mcp{state: st, status: stSuccess, sched: sched})
}

// prune keeps the newest 1 to 3 checkpoints of each branch of the thread;
// every checkpoint left must still load as the model has it.
func (h *harness) prune() {
	h.t.Helper()
	if _, err := h.s.Prune(h.ctx, store.PruneRequest{Thread: h.thread, KeepLast: 1 + h.src.intn(3)}); err != nil {
		h.fatalf("prune: %v", err)
	}
	h.st.Prunes++
	h.verifyAll(true, h.thread)
}

// copyThread copies the thread and goes on in the copy.
func (h *harness) copyThread() {
	h.t.Helper()
	h.n++
	to := "t" + strconv.Itoa(h.n)
	if _, err := h.s.CopyThread(h.ctx, h.thread, to); err != nil {
		h.fatalf("copy %s to %s: %v", h.thread, to, err)
	}
	h.cps[to] = maps.Clone(h.cps[h.thread])
	h.head[to] = h.head[h.thread]
	h.thread = to
	h.threads = append(h.threads, to)
	h.st.Copies++
	h.verifyAll(false, to)
}

// rekey seals every blob with a new key (a plaintext store is encrypted)
// and reopens the store with the new key alone.
func (h *harness) rekey() {
	h.t.Helper()
	h.closeStore()
	h.n++
	newKey := testKey(h.n)
	h.keys = append([][]byte{newKey}, h.keys...)
	h.openStore()
	if _, err := h.s.Rekey(h.ctx); err != nil {
		h.fatalf("rekey: %v", err)
	}
	h.closeStore()
	h.keys = [][]byte{newKey}
	h.openStore()
	h.st.Rekeys++
	h.verifyAll(false, h.threads...)
}

// reopen closes the store and opens it again: nothing cached.
func (h *harness) reopen() {
	h.t.Helper()
	h.closeStore()
	h.openStore()
	h.verifyAll(false, h.threads...)
}

// genPatch draws a fork's patch (RFC 6902) on the fields other than the
// step counter, and applies it to the model's state.
func (h *harness) genPatch(st mstate) (state.Patch, mstate) {
	h.n++
	v := "p" + strconv.Itoa(h.n)
	raw := json.RawMessage(canon(v))
	out := maps.Clone(st)
	var p state.Patch
	for range 1 + h.src.intn(2) {
		switch h.src.intn(4) {
		case 0:
			op := state.OpAdd
			if _, ok := out["r"]; ok {
				op = state.OpReplace
			}
			p = append(p, state.Op{Op: op, Path: "/r", Value: raw})
			out["r"] = v
		case 1:
			if l, ok := out["a"].([]any); ok {
				p = append(p, state.Op{Op: state.OpAdd, Path: "/a/-", Value: raw})
				out["a"] = append(slices.Clone(l), v)
			}
		case 2:
			if o, ok := out["o"].(map[string]any); ok {
				p = append(p, state.Op{Op: state.OpAdd, Path: "/o/k9", Value: raw})
				o = maps.Clone(o)
				o["k9"] = v
				out["o"] = o
			}
		default:
			if _, ok := out["c"]; ok {
				p = append(p, state.Op{Op: state.OpRemove, Path: "/c"})
				delete(out, "c")
			}
		}
	}
	return p, out
}
