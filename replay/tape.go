package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// tape answers the new run's calls from the recorded thread's call
// records (flow.Tape).
type tape struct {
	src       store.Store // the recorded thread's store
	dst       store.Store // the new run's
	recThread string
	newThread string
	ns        string

	mu   sync.Mutex
	seqs map[int64]int64 // new seq → recorded seq, in namespace ns
	// recSeqs are the recorded branch's seqs, oldest first; lastNew is
	// the newest new seq mapped, to recSeqs[lastPos].
	recSeqs []int64
	lastNew int64
	lastPos int
	writes  map[string][]store.Write
	calls   int
	first   *CallDeparture
}

// callRecord is the part of a call record the tape reads.
type callRecord struct {
	Kind    string          `json:"kind"`
	Name    string          `json:"name"`
	Request json.RawMessage `json:"request"`
	Answer  json.RawMessage `json:"answer"`
}

// Answer implements flow.Tape.
func (tp *tape) Answer(ctx context.Context, c flow.Call) (json.RawMessage, error) {
	recSeq := tp.recordedSeq(c.Task.Namespace, c.Task.ReadSeq)
	if c.Kind == flow.CallSteer {
		return tp.record(ctx, c.Task, recSeq, c.Name) // what the loop took there, nil: nothing
	}
	raw, err := tp.record(ctx, c.Task, recSeq, flow.CallRecordPrefix+strconv.Itoa(c.Index))
	if err != nil {
		return nil, err
	}
	var rec callRecord
	if raw != nil && json.Unmarshal(raw, &rec) != nil {
		raw = nil
	}
	reason := ""
	switch {
	case raw == nil:
		reason = fmt.Sprintf("no %s call was recorded at this place (call %d of the task)", c.Kind, c.Index)
	case rec.Kind != c.Kind || rec.Name != c.Name:
		reason = fmt.Sprintf("the recording has %s call %s here, the new run made %s call %s", rec.Kind, rec.Name, c.Kind, c.Name)
	case !sameRequest(c.Kind, rec.Request, c.Request):
		reason = fmt.Sprintf("the %s call's request differs from the recorded one", c.Kind)
	}
	if reason != "" {
		tp.depart(ctx, c, reason, rec.Request)
		if raw == nil || rec.Kind != c.Kind {
			return nil, fmt.Errorf("%w: %s", ErrDeparted, reason)
		}
	}
	tp.mu.Lock()
	tp.calls++
	tp.mu.Unlock()
	return raw, nil
}

// sameRequest compares two request records: a model call's by the digest
// of its whole request, a tool call's by tool and arguments.
func sameRequest(kind string, a, b json.RawMessage) bool {
	if kind == "model" {
		var x, y struct {
			Digest string `json:"digest"`
		}
		return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && x.Digest != "" && x.Digest == y.Digest
	}
	p, err := state.DiffJSON(a, b)
	return err == nil && len(p) == 0
}

// depart keeps the first departing call.
func (tp *tape) depart(ctx context.Context, c flow.Call, reason string, recorded json.RawMessage) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.first != nil {
		return
	}
	d := &CallDeparture{Node: c.Task.Node, Namespace: c.Task.Namespace, Index: c.Index, Kind: c.Kind, Name: c.Name, Reason: reason,
		Recorded: recorded, New: c.Request, newReadSeq: c.Task.ReadSeq}
	if len(recorded) > 0 {
		d.Diff, _ = state.DiffJSON(recorded, c.Request) // both are records this package's callers wrote
	}
	if c.Task.Namespace != tp.ns {
		// A nested run's call: it happens inside the step that reads
		// the head of the replayed namespace.
		if head, err := tp.dst.Load(ctx, store.LoadRequest{Thread: tp.newThread, Namespace: tp.ns}); err == nil {
			d.newReadSeq = head.Seq
		}
	}
	tp.first = d
}

// recordedSeq maps a seq of the new run to the recorded one: through the
// branch's correspondence in the replayed namespace, unchanged in others.
func (tp *tape) recordedSeq(ns string, seq int64) int64 {
	if ns != tp.ns {
		return seq
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if r, ok := tp.seqs[seq]; ok {
		return r
	}
	// A step of the run under way: the new thread is one line, so its
	// seqs past the last one compared follow the recorded branch.
	if pos := tp.lastPos + int(seq-tp.lastNew); tp.lastNew > 0 && seq > tp.lastNew && pos < len(tp.recSeqs) {
		return tp.recSeqs[pos]
	}
	return -1
}

// record finds journal entry name ("call/<n>", "steer/<round>") of the
// recorded task that stands for task (nil when there is none).
func (tp *tape) record(ctx context.Context, task flow.RunInfo, recSeq int64, name string) (json.RawMessage, error) {
	if recSeq < 0 {
		return nil, nil
	}
	suffix, ok := strings.CutPrefix(task.Key, keyPrefix(tp.newThread, task.Namespace, task.ReadSeq))
	if !ok {
		return nil, nil
	}
	ws, err := tp.recordedWrites(ctx, task.Namespace, recSeq)
	if err != nil {
		return nil, err
	}
	want := "/" + keyPrefix(tp.recThread, task.Namespace, recSeq) + suffix + "/" + name
	var best json.RawMessage
	var bestHead int64 = -1
	for _, w := range ws {
		rest, ok := strings.CutPrefix(w.Task, "journal/")
		if !ok || !strings.HasSuffix(rest, want) {
			continue
		}
		head, err := strconv.ParseInt(strings.TrimSuffix(rest, want), 10, 64)
		if err == nil && head > bestHead {
			best, bestHead = w.Update, head
		}
	}
	return best, nil
}

func (tp *tape) recordedWrites(ctx context.Context, ns string, seq int64) ([]store.Write, error) {
	k := ns + "\x00" + strconv.FormatInt(seq, 10)
	tp.mu.Lock()
	ws, ok := tp.writes[k]
	tp.mu.Unlock()
	if ok {
		return ws, nil
	}
	ws, err := tp.src.Writes(ctx, tp.recThread, ns, seq)
	if err != nil {
		return nil, fmt.Errorf("replay: the records of checkpoint %d: %w", seq, err)
	}
	tp.mu.Lock()
	tp.writes[k] = ws
	tp.mu.Unlock()
	return ws, nil
}

// answerAt is the value the recorded step reading seq resumed its
// interrupt with (nil: none recorded).
func (tp *tape) answerAt(ctx context.Context, seq int64) (json.RawMessage, error) {
	ws, err := tp.recordedWrites(ctx, tp.ns, seq)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		if !strings.HasPrefix(w.Task, "journal/") || !strings.Contains(w.Task, "/"+flow.CallRecordPrefix) {
			continue
		}
		var rec callRecord
		if json.Unmarshal(w.Update, &rec) == nil && rec.Kind == "interrupt" {
			return rec.Answer, nil
		}
	}
	return nil, nil
}

// mapSeq says that the new run's checkpoint newSeq stands for the
// recorded branch's checkpoint at position pos.
func (tp *tape) mapSeq(newSeq int64, pos int) {
	tp.mu.Lock()
	tp.seqs[newSeq] = tp.recSeqs[pos]
	tp.lastNew, tp.lastPos = newSeq, pos
	tp.mu.Unlock()
}

func (tp *tape) firstDeparture() *CallDeparture {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.first
}

// keyPrefix is the start of the idempotency keys of the tasks of a step
// reading seq (flow's "thread/seq/" or "thread/ns/seq/").
func keyPrefix(thread, ns string, seq int64) string {
	if ns != "" {
		return thread + "/" + ns + "/" + strconv.FormatInt(seq, 10) + "/"
	}
	return thread + "/" + strconv.FormatInt(seq, 10) + "/"
}

// sameIDs rewrites, in the new run's state, the ids derived from its
// thread and seqs (messages' ids, tool calls' keys) into the recorded
// thread's, so that states compare by what the steps did.
func (tp *tape) sameIDs(b []byte) []byte {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for n, r := range tp.seqs {
		if n != r || tp.newThread != tp.recThread {
			b = bytes.ReplaceAll(b, []byte(`"`+keyPrefix(tp.newThread, tp.ns, n)), []byte(`"`+keyPrefix(tp.recThread, tp.ns, r)))
		}
	}
	if tp.newThread != tp.recThread {
		b = bytes.ReplaceAll(b, []byte(`"`+tp.newThread+`/`), []byte(`"`+tp.recThread+`/`))
	}
	return b
}
