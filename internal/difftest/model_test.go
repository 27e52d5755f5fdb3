package difftest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// The reference interpreter: the generated graph's semantics written from
// the documentation (README "The model", docs/DESIGN.md section
// 5, docs/proofs.md), on plain decoded JSON, sharing no code with package
// state or flow. It is the oracle the stored and reloaded states are
// compared with.

// mstate is a state as the model keeps it: decoded JSON, numbers as
// json.Number.
type mstate map[string]any

// Checkpoint statuses as the model names them (store.Status.String()).
const (
	stSuccess     = "SUCCESS"
	stInterrupted = "INTERRUPTED"
	stFailed      = "FAILED"
)

// Schedules: what a checkpoint runs next.
const (
	schedNone = -2 // nothing
	schedLead = -1 // "lead" alone (after START)
	// k >= 0: "lead" and the tasks of script step k
)

// mcp is a checkpoint as the model predicts it.
type mcp struct {
	state  mstate
	status string
	sched  int
}

var errModelNotFound = errors.New("model: remove of a message not in the list")

// fieldReducers names each declared field's reducer; others replace.
var fieldReducers = map[string]string{
	"step": "add", "r": "replace", "a": "append", "m": "messages", "o": "merge", "n": "add", "c": "concat",
}

func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// canon is the canonical JSON of a value (object keys sorted).
func canon(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// canonJSON is the canonical form of a JSON text.
func canonJSON(b []byte) (string, error) {
	v, err := decodeJSON(b)
	if err != nil {
		return "", err
	}
	return canon(v), nil
}

// apply merges an update into a state, field by field, as the documented
// reducers do; the input state is not changed.
func (st mstate) apply(upd map[string]json.RawMessage) (mstate, error) {
	out := maps.Clone(st)
	if out == nil {
		out = mstate{}
	}
	for _, f := range slices.Sorted(maps.Keys(upd)) {
		v, err := decodeJSON(upd[f])
		if err != nil {
			return nil, err
		}
		cur, had := out[f]
		nv, err := reduce(fieldReducers[f], cur, had, v)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f, err)
		}
		out[f] = nv
	}
	return out, nil
}

func reduce(name string, cur any, had bool, v any) (any, error) {
	switch name {
	case "add":
		if !had || cur == nil {
			return v, nil
		}
		x, err1 := cur.(json.Number).Int64()
		y, err2 := v.(json.Number).Int64()
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("add of %v and %v", cur, v)
		}
		return json.Number(strconv.FormatInt(x+y, 10)), nil
	case "append":
		l, _ := cur.([]any)
		l = slices.Clone(l)
		if l == nil {
			l = []any{}
		}
		if vs, ok := v.([]any); ok {
			return append(l, vs...), nil
		}
		return append(l, v), nil
	case "messages":
		return reduceMessages(cur, v)
	case "merge":
		o, _ := cur.(map[string]any)
		o = maps.Clone(o)
		if o == nil {
			o = map[string]any{}
		}
		for k, x := range v.(map[string]any) {
			if x == nil {
				delete(o, k)
			} else {
				o[k] = x
			}
		}
		return o, nil
	case "concat":
		if !had || cur == nil {
			return v, nil
		}
		return cur.(string) + v.(string), nil
	default: // replace
		return v, nil
	}
}

// reduceMessages is add_messages: a message whose id is in the list
// replaces it in place, a new one is appended, a removal deletes by id (an
// id not in the list is an error) and the remove-all marker clears it.
func reduceMessages(cur, v any) (any, error) {
	l, _ := cur.([]any)
	l = slices.Clone(l)
	if l == nil {
		l = []any{}
	}
	vs, ok := v.([]any)
	if !ok {
		vs = []any{v}
	}
	for _, e := range vs {
		m := e.(map[string]any)
		id, _ := m["id"].(string)
		at := slices.IndexFunc(l, func(x any) bool { return x.(map[string]any)["id"] == id })
		switch {
		case m["type"] == "remove" && id == "__remove_all__":
			l = []any{}
		case m["type"] == "remove" && at < 0:
			return nil, fmt.Errorf("%w: %s", errModelNotFound, id)
		case m["type"] == "remove":
			l = slices.Delete(l, at, at+1)
		case at >= 0:
			l[at] = m
		default:
			l = append(l, m)
		}
	}
	return l, nil
}

// messageIDs lists the ids of the state's messages, in order.
func (st mstate) messageIDs() []string {
	l, _ := st["m"].([]any)
	ids := make([]string, 0, len(l))
	for _, e := range l {
		ids = append(ids, e.(map[string]any)["id"].(string))
	}
	return ids
}

func (st mstate) stepCounter() int64 {
	n, _ := st["step"].(json.Number)
	v, _ := n.Int64()
	return v
}

// afterLead is what the router after "lead" schedules in a state.
func (sc script) afterLead(st mstate) int {
	v := st.stepCounter()
	if v >= 1 && v <= int64(len(sc)) {
		return int(v - 1)
	}
	return schedNone
}

// subUpdate is the update the subgraph node returns: the child's log
// (its input, then its two nodes) and its length.
func subUpdate(parent mstate) map[string]json.RawMessage {
	in := "in:none"
	if n, ok := parent["n"]; ok {
		in = "in:" + canon(n)
	}
	return map[string]json.RawMessage{"a": json.RawMessage(canon([]string{in, "c1", "c2"})), "n": json.RawMessage("3")}
}

// askUpdate is the update of the node that asked, once answered.
func askUpdate(answer string) map[string]json.RawMessage {
	return map[string]json.RawMessage{"r": json.RawMessage(canon("ans:" + answer)), "a": json.RawMessage(canon([]string{answer}))}
}

// tasks lists a schedule's tasks in the order their updates are applied:
// "lead", then the router's targets in the order it returned them, a node
// already scheduled with the shared state dropped, every Send kept.
func (sc script) tasks(sched int) []entry {
	tasks := []entry{{Node: "lead"}}
	seen := map[string]bool{"lead": true}
	if sched < 0 {
		return tasks
	}
	for _, e := range sc[sched] {
		if e.Kind != kindSend && seen[e.Node] {
			continue
		}
		seen[e.Node] = true
		tasks = append(tasks, e)
	}
	return tasks
}

// run predicts the checkpoints a run writes from a state and its
// schedule; answer answers the first step's interrupt, if any.
func (sc script) run(st mstate, sched int, answer *string) []mcp {
	return sc.runOrdered(st, sched, answer, false)
}

// runOrdered is run; reversed applies each step's updates in the reverse
// of task order (what a store replaying in another order would rebuild).
func (sc script) runOrdered(st mstate, sched int, answer *string, reversed bool) []mcp {
	var out []mcp
	for sched != schedNone {
		tasks := sc.tasks(sched)
		var upds []map[string]json.RawMessage
		interrupted := false
		for _, t := range tasks {
			switch {
			case t.Node == "lead":
				upds = append(upds, map[string]json.RawMessage{"step": json.RawMessage("1")})
			case t.Kind == kindSub:
				upds = append(upds, subUpdate(st))
			case t.Kind == kindAsk && answer == nil:
				interrupted = true
			case t.Kind == kindAsk:
				upds = append(upds, askUpdate(*answer))
			default:
				upds = append(upds, resolve(t.Spec, st.messageIDs()))
			}
		}
		if interrupted {
			return append(out, mcp{state: st, status: stInterrupted, sched: sched})
		}
		if reversed {
			slices.Reverse(upds)
		}
		next, err := st, error(nil)
		for _, u := range upds {
			if next, err = next.apply(u); err != nil {
				return append(out, mcp{state: st, status: stFailed, sched: sched})
			}
		}
		st, answer = next, nil
		sched = sc.afterLead(st)
		out = append(out, mcp{state: st, status: stSuccess, sched: sched})
	}
	return out
}
