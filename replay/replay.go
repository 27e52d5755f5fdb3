package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// Thread replays thread of s with opts.Assistant and reports the first
// departure from the recording (see the package documentation). Errors
// are for a replay that could not be made — no such thread
// (store.ErrNotFound), bad options (store.ErrInvalidArgument), an Into
// thread that exists (store.ErrConflict) — and are returned before
// anything is written; a new run that fails is a departure, not an
// error.
func Thread(ctx context.Context, s store.Store, thread string, opts Options) (Report, error) {
	if opts.Namespace == "" {
		return replayRoot(ctx, s, thread, opts, nil)
	}
	rep := Report{Thread: thread, Namespace: opts.Namespace, From: opts.From, Into: opts.Into}
	if opts.From > 0 {
		return rep, fmt.Errorf("%w: --from with --ns: a nested namespace is replayed from the beginning (its parent's steps run it)", store.ErrInvalidArgument)
	}
	if err := check(thread, opts); err != nil {
		return rep, err
	}
	rec, err := branch(ctx, s, thread, opts.Namespace)
	if err != nil {
		return rep, err
	}
	root := opts
	root.Namespace = ""
	rep, err = replayRoot(ctx, s, thread, root, func(ctx context.Context, e *engine) error { return e.compareNamespace(ctx, rec, opts.Namespace) })
	rep.Namespace = opts.Namespace
	return rep, err
}

// replayRoot replays the root namespace; after, when not nil, runs once
// the new run is done, before the report is summed up.
func replayRoot(ctx context.Context, s store.Store, thread string, opts Options, after func(context.Context, *engine) error) (Report, error) {
	rep := Report{Thread: thread, Namespace: opts.Namespace, From: opts.From, Into: opts.Into}
	if err := check(thread, opts); err != nil {
		return rep, err
	}
	th, err := s.Thread(ctx, thread)
	if err != nil {
		return rep, fmt.Errorf("replay: thread %q: %w", thread, err)
	}
	rec, err := branch(ctx, s, thread, opts.Namespace)
	if err != nil {
		return rep, err
	}
	start := 0 // the first position replayed; those before are copied
	if opts.From > 0 {
		start = 1 + slices.IndexFunc(rec, func(cp store.Checkpoint) bool { return cp.Seq == opts.From })
		if start == 0 {
			return rep, fmt.Errorf("%w: --from %d: no checkpoint %d on the head's branch of thread %q namespace %q", store.ErrInvalidArgument, opts.From, opts.From, thread, opts.Namespace)
		}
	}
	entries, err := recordedEntries(ctx, s, thread)
	if err != nil {
		return rep, err
	}
	dst, newThread := s, opts.Into
	if opts.Into == "" {
		mem := inmem.Open(store.Options{})
		defer mem.Close()
		dst, newThread = mem, thread+"-replay"
	}
	if _, err := dst.CreateThread(ctx, store.Thread{ID: newThread, Tenant: th.Tenant, Metadata: th.Metadata}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return rep, fmt.Errorf("%w: thread %q exists: replay writes into a new thread", store.ErrConflict, opts.Into)
		}
		return rep, fmt.Errorf("replay: new thread: %w", err)
	}
	e := &engine{asst: opts.Assistant, dst: dst, rec: rec, rep: &rep,
		tp: &tape{src: s, dst: dst, recThread: thread, newThread: newThread, ns: opts.Namespace, seqs: map[int64]int64{}, writes: map[string][]store.Write{}}}
	for _, cp := range rec {
		e.tp.recSeqs = append(e.tp.recSeqs, cp.Seq)
	}
	e.inbox = &inbox{tp: e.tp, rec: rec, entries: entries}
	for i := 0; i < start; i++ {
		if err := e.copy(ctx, i); err != nil {
			return rep, err
		}
	}
	if err := e.run(ctx, start); err != nil {
		return rep, err
	}
	if after != nil {
		if err := after(ctx, e); err != nil {
			return rep, err
		}
	}
	rep.Calls = e.tp.calls
	rep.Matched = rep.Departure == nil
	return rep, nil
}

func check(thread string, opts Options) error {
	switch {
	case thread == "":
		return fmt.Errorf("%w: replay needs a thread id", store.ErrInvalidArgument)
	case opts.Assistant == nil:
		return fmt.Errorf("%w: replay needs the assistant (agent file, pipeline or graph) to run", store.ErrInvalidArgument)
	case opts.From < 0:
		return fmt.Errorf("%w: --from %d: a checkpoint seq is positive", store.ErrInvalidArgument, opts.From)
	case opts.Into == thread:
		return fmt.Errorf("%w: --into %q is the thread replayed: replay never writes to it", store.ErrInvalidArgument, opts.Into)
	case strings.Contains(opts.Into, "\x00"):
		return fmt.Errorf("%w: --into: a thread id holds no NUL", store.ErrInvalidArgument)
	}
	return nil
}

// branch reads the head's branch of the namespace, oldest first, states
// included.
func branch(ctx context.Context, s store.Store, thread, ns string) (chain, error) {
	bySeq := map[int64]store.Checkpoint{}
	var head int64
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: thread, Namespace: ns, WithState: true}) {
		if err != nil {
			return nil, fmt.Errorf("replay: the history of thread %q namespace %q: %w", thread, ns, err)
		}
		if head == 0 {
			head = cp.Seq
		}
		bySeq[cp.Seq] = cp
	}
	if head == 0 {
		return nil, fmt.Errorf("%w: thread %q has no checkpoint in namespace %q", store.ErrNotFound, thread, ns)
	}
	var out chain
	for seq := head; seq != 0; {
		cp, ok := bySeq[seq]
		if !ok {
			break // pruned below: the branch starts at a snapshot
		}
		out = append(out, cp)
		seq = cp.Parent
	}
	slices.Reverse(out)
	return out, nil
}

// engine is one replay under way: rec[i] stands for the new thread's
// checkpoint heads[i].
type engine struct {
	asst  runs.Assistant
	dst   store.Store
	rec   chain
	tp    *tape
	rep   *Report
	heads []int64
	inbox *inbox
}

// outside reports whether a recorded checkpoint came from outside the
// code (a run's input, an outside update, a fork), so that it is copied
// rather than run again.
func outside(cp store.Checkpoint) bool {
	switch cp.Meta.Source {
	case "input", "update", "fork":
		return true
	}
	return false
}

// copy writes recorded checkpoint i onto the new thread's head as it was.
func (e *engine) copy(ctx context.Context, i int) error {
	cp := e.rec[i]
	var parent int64
	patch := cp.Patch
	if len(e.heads) > 0 {
		parent = e.heads[len(e.heads)-1]
	} else if cp.Parent != 0 {
		patch = cp.State.AsPatch() // the branch starts with this state
	}
	out, err := e.dst.Append(ctx, store.Checkpoint{Thread: e.tp.newThread, Namespace: e.tp.ns, Parent: parent, Nodes: cp.Nodes, Status: cp.Status,
		Patch: patch, State: cp.State, Meta: cp.Meta})
	if err != nil {
		return fmt.Errorf("replay: copying checkpoint %d: %w", cp.Seq, err)
	}
	e.heads = append(e.heads, out.Seq)
	e.tp.mapSeq(out.Seq, i)
	return nil
}

// run replays the recorded branch from position i.
func (e *engine) run(ctx context.Context, i int) error {
	for i < len(e.rec) {
		if outside(e.rec[i]) || len(e.heads) == 0 {
			if err := e.copy(ctx, i); err != nil {
				return err
			}
			i++
			e.rep.Checkpoints++
			continue
		}
		n, err := e.steps(ctx, i)
		if err != nil || e.rep.Departure != nil {
			return err
		}
		i += n
	}
	if d := e.tp.firstDeparture(); d != nil {
		// A call departed but the states matched to the end.
		e.rep.Departure = &Departure{Seq: e.rec[len(e.rec)-1].Seq, NewSeq: e.heads[len(e.heads)-1], Reason: d.Reason, Call: d}
	}
	return nil
}

// steps resumes the new thread, which stands at recorded position i-1,
// and compares what the run wrote with rec[i:]; it returns how many
// recorded checkpoints matched.
func (e *engine) steps(ctx context.Context, i int) (int, error) {
	prev := e.heads[len(e.heads)-1]
	spec := runs.RunSpec{Store: e.dst, Thread: e.tp.newThread, Resume: true, RunID: e.rec[i].Meta.RunID, Durability: flow.DurabilitySync, Inbox: e.inbox}
	if e.rec[i-1].Status == store.StatusInterrupted || e.rec[i-1].Meta.Interrupt != nil {
		// The answered step read the paused checkpoint or, resumed from
		// an interrupt, the state its unfinished step read (StepOf).
		for _, seq := range []int64{e.rec[i].Parent, e.rec[i-1].Meta.StepOf} {
			answer, err := e.tp.answerAt(ctx, seq)
			if err != nil {
				return 0, err
			}
			if answer != nil {
				spec.Answer = answer
				break
			}
		}
	}
	_, runErr := e.asst.Run(flow.WithTape(ctx, e.tp), spec)
	got, err := e.written(ctx, prev)
	if err != nil {
		return 0, err
	}
	call := e.tp.firstDeparture()
	k := 0
	for ; k < len(got); k++ {
		if i+k >= len(e.rec) || outside(e.rec[i+k]) {
			e.depart(0, got[k], "the recorded run ended here; the new run went on", runErr, nil)
			return k, nil
		}
		r := e.rec[i+k]
		e.heads = append(e.heads, got[k].Seq)
		e.tp.mapSeq(got[k].Seq, i+k)
		reason, diff := e.compare(r, got[k])
		if call != nil && call.newReadSeq == got[k].Parent && reason == "" {
			reason = call.Reason
		}
		if reason != "" {
			e.depart(r.Seq, got[k], reason, runErr, diff)
			if call != nil && call.newReadSeq == got[k].Parent {
				e.rep.Departure.Call = call
			}
			return k, nil
		}
		e.rep.Checkpoints++
	}
	if k > 0 && i+k < len(e.rec) && e.rec[i+k].Meta.RunID != e.rec[i+k-1].Meta.RunID {
		return k, nil // the recorded run stopped here too (a pause, a crash): the next resumes it
	}
	if i+k < len(e.rec) && !outside(e.rec[i+k]) {
		why := "the new run stopped before this recorded step"
		if runErr != nil {
			why += ": " + runErr.Error()
		}
		e.depart(e.rec[i+k].Seq, store.Checkpoint{}, why, runErr, nil)
		if call != nil {
			e.rep.Departure.Call = call
		}
	}
	return k, nil
}

// written lists the new thread's checkpoints after prev, oldest first.
func (e *engine) written(ctx context.Context, prev int64) ([]store.Checkpoint, error) {
	var out []store.Checkpoint
	for cp, err := range e.dst.History(ctx, store.HistoryRequest{Thread: e.tp.newThread, Namespace: e.tp.ns, WithState: true}) {
		if err != nil {
			return nil, fmt.Errorf("replay: the new run's history: %w", err)
		}
		if cp.Seq <= prev {
			break
		}
		out = append(out, cp)
	}
	slices.Reverse(out)
	return out, nil
}

// compare says how new differs from the recorded checkpoint r ("" when
// it does not) and gives the state diff.
func (e *engine) compare(r, n store.Checkpoint) (string, state.Patch) {
	nb := e.tp.sameIDs(n.State.AppendJSON(nil))
	diff, err := state.DiffJSON(r.State.AppendJSON(nil), nb)
	switch {
	case err != nil:
		return "the states do not compare: " + err.Error(), nil
	case r.Status != n.Status:
		return fmt.Sprintf("the recorded step ended %s, the new one %s%s", r.Status, n.Status, errorOf(n)), diff
	case !slices.Equal(r.Nodes, n.Nodes):
		return fmt.Sprintf("the recorded step ran %v, the new one %v", r.Nodes, n.Nodes), diff
	case len(diff) > 0:
		return "the state differs", diff
	}
	return "", nil
}

func errorOf(cp store.Checkpoint) string {
	if cp.Meta.Error != "" {
		return " (" + cp.Meta.Error + ")"
	}
	return ""
}

func (e *engine) depart(recSeq int64, n store.Checkpoint, reason string, runErr error, diff state.Patch) {
	d := &Departure{Seq: recSeq, NewSeq: n.Seq, Reason: reason, StateDiff: diff}
	if recSeq != 0 {
		if r := slices.IndexFunc(e.rec, func(cp store.Checkpoint) bool { return cp.Seq == recSeq }); r >= 0 {
			d.Node = strings.Join(e.rec[r].Nodes, ",")
		}
	}
	d.NewNode = strings.Join(n.Nodes, ",")
	if runErr != nil {
		d.Error = runErr.Error()
	}
	e.rep.Departure = d
}

// MarshalIndent is the report as indented JSON.
func (r Report) MarshalIndent() []byte {
	b, _ := json.MarshalIndent(r, "", "  ") // a report always encodes
	return b
}

// compareNamespace compares the recorded branch rec of nested namespace
// ns with the one the new run wrote: the report's checkpoints and
// departure become the namespace's; a departure of the root stays when
// the namespace matched (the run departed outside it).
func (e *engine) compareNamespace(ctx context.Context, rec chain, ns string) error {
	got, err := branch(ctx, e.dst, e.tp.newThread, ns)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	rootDep := e.rep.Departure
	e.rep.Departure, e.rep.Checkpoints = nil, 0
	call := e.tp.firstDeparture()
	if call != nil && call.Namespace != ns {
		call = nil
	}
	for k := range max(len(rec), len(got)) {
		var d *Departure
		switch {
		case k >= len(got):
			d = &Departure{Seq: rec[k].Seq, Node: strings.Join(rec[k].Nodes, ","), Reason: "the new run wrote no checkpoint of the namespace here"}
		case k >= len(rec):
			d = &Departure{NewSeq: got[k].Seq, NewNode: strings.Join(got[k].Nodes, ","), Reason: "the recorded run ended here; the new run went on"}
		default:
			reason, diff := e.compare(rec[k], got[k])
			if reason == "" && call != nil && slices.Contains(got[k].Nodes, call.Node) {
				reason = call.Reason // the step of the departing call
			}
			if reason != "" {
				d = &Departure{Seq: rec[k].Seq, NewSeq: got[k].Seq, Node: strings.Join(rec[k].Nodes, ","), NewNode: strings.Join(got[k].Nodes, ","), Reason: reason, StateDiff: diff}
			}
		}
		if d != nil {
			d.Call = call
			e.rep.Departure = d
			return nil
		}
		e.rep.Checkpoints++
	}
	if rootDep != nil {
		rootDep.Reason = "the run departed outside namespace " + ns + " (whose checkpoints matched), at this checkpoint of the root: " + rootDep.Reason
	}
	e.rep.Departure = rootDep
	return nil
}
