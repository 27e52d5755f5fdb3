package difftest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// source decodes fuzz bytes into choices: each choice reads one byte, and
// an exhausted source reads zeros, so every byte string is a program.
type source struct {
	b []byte
	i int
}

func (s *source) byte() byte {
	if s.i >= len(s.b) {
		return 0
	}
	c := s.b[s.i]
	s.i++
	return c
}

// intn returns a choice in [0, n).
func (s *source) intn(n int) int {
	if n <= 1 {
		return 0
	}
	return int(s.byte()) % n
}

func (s *source) chance(of int) bool { return s.intn(of) == 0 }

// The task kinds of a script step.
const (
	kindPlain = iota // one of the writer nodes w0..w3, its spec in the script
	kindSend         // a Send to node "s" carrying its spec as input
	kindSub          // the subgraph node
	kindAsk          // the node that interrupts for an answer
)

// entry is one task of a script step.
type entry struct {
	Kind int       `json:"kind"`
	Node string    `json:"node"`
	Spec writeSpec `json:"spec"`
}

// script is a generated graph's behaviour: step k of the script is what
// the router after "lead" schedules when the state's step counter is k+1.
type script [][]entry

// msgOp is one operation on the messages field, resolved against the
// message ids the writer reads: add a message with a new id, replace or
// remove the message at position P (modulo the list), remove all.
type msgOp struct {
	K    string `json:"k"` // "add", "replace", "remove", "all"
	ID   string `json:"id,omitempty"`
	P    int    `json:"p,omitempty"`
	Text string `json:"t,omitempty"`
}

// writeSpec is what one writer writes, field by field (absent: no write).
type writeSpec struct {
	R *string            `json:"r,omitempty"` // replace
	A []string           `json:"a,omitempty"` // append
	M []msgOp            `json:"m,omitempty"` // messages
	O map[string]*string `json:"o,omitempty"` // merge; nil deletes
	N *int               `json:"n,omitempty"` // add
	C *string            `json:"c,omitempty"` // custom: concat
	U *string            `json:"u,omitempty"` // undeclared: replace
}

func ptr[T any](v T) *T { return &v }

// genSpec draws a write spec; every field is written with probability one
// half, so parallel writers often write the same field.
func genSpec(s *source, tag string) writeSpec {
	var w writeSpec
	if s.chance(2) {
		w.R = ptr("r" + tag)
	}
	if s.chance(2) {
		for i := range 1 + s.intn(2) {
			w.A = append(w.A, "a"+tag+"."+strconv.Itoa(i))
		}
	}
	if s.chance(2) {
		for i := range 1 + s.intn(3) {
			op := msgOp{P: s.intn(8), Text: "t" + tag + "." + strconv.Itoa(i)}
			switch c := s.intn(10); {
			case c < 4:
				op.K, op.ID = "add", "m"+strconv.Itoa(s.intn(12))
			case c < 6:
				op.K = "replace"
			case c < 9:
				op.K = "remove"
			default:
				op.K = "all"
			}
			w.M = append(w.M, op)
		}
	}
	if s.chance(2) {
		w.O = map[string]*string{}
		for range 1 + s.intn(2) {
			k := "k" + strconv.Itoa(s.intn(4))
			if s.chance(3) {
				w.O[k] = nil
			} else {
				w.O[k] = ptr("o" + tag)
			}
		}
	}
	if s.chance(2) {
		w.N = ptr(s.intn(11) - 5)
	}
	if s.chance(2) {
		w.C = ptr("c" + tag + ";")
	}
	if s.chance(4) {
		w.U = ptr("u" + tag)
	}
	return w
}

// genScript draws a script of 2 to maxSteps steps (at most 257) of 1 to 6
// tasks each.
func genScript(s *source, maxSteps int) script {
	n := 2 + s.intn(maxSteps-1)
	sc := make(script, n)
	for k := range sc {
		tasks := 1 + s.intn(6)
		for i := range tasks {
			tag := fmt.Sprintf("%d.%d", k, i)
			switch c := s.intn(20); {
			case c < 9:
				// A node may be scheduled twice: it runs once, with the
				// first entry's spec (the model drops the second).
				node := "w" + strconv.Itoa(s.intn(4))
				sc[k] = append(sc[k], entry{Kind: kindPlain, Node: node, Spec: genSpec(s, tag)})
			case c < 16:
				sc[k] = append(sc[k], entry{Kind: kindSend, Node: "s", Spec: genSpec(s, tag)})
			case c < 18:
				sc[k] = append(sc[k], entry{Kind: kindSub, Node: "sub"})
			default:
				sc[k] = append(sc[k], entry{Kind: kindAsk, Node: "ask"})
			}
		}
	}
	return sc
}

// resolve turns a spec into the update a writer returns, given the ids of
// the messages it reads: it keeps its own copy of the list, so one update
// never removes a message twice (parallel writers still may: the step then
// fails, which the model predicts too).
func resolve(w writeSpec, ids []string) map[string]json.RawMessage {
	upd := map[string]json.RawMessage{}
	put := func(field string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err) // strings, ints and maps of them always marshal
		}
		upd[field] = b
	}
	if w.R != nil {
		put("r", *w.R)
	}
	if len(w.A) > 0 {
		put("a", w.A)
	}
	if msgs := resolveMessages(w.M, ids); len(msgs) > 0 {
		put("m", msgs)
	}
	if w.O != nil {
		put("o", w.O)
	}
	if w.N != nil {
		put("n", *w.N)
	}
	if w.C != nil {
		put("c", *w.C)
	}
	if w.U != nil {
		put("u", *w.U)
	}
	return upd
}

type message struct {
	ID      string `json:"id"`
	Content string `json:"content,omitempty"`
	Type    string `json:"type,omitempty"`
}

func resolveMessages(ops []msgOp, ids []string) []message {
	live := append([]string(nil), ids...)
	var out []message
	for _, op := range ops {
		switch op.K {
		case "add":
			out = append(out, message{ID: op.ID, Content: op.Text})
			if !slices.Contains(live, op.ID) {
				live = append(live, op.ID)
			}
		case "replace":
			if len(live) > 0 {
				out = append(out, message{ID: live[op.P%len(live)], Content: op.Text})
			}
		case "remove":
			if len(live) > 0 {
				p := op.P % len(live)
				out = append(out, message{ID: live[p], Type: "remove"})
				live = append(live[:p:p], live[p+1:]...)
			}
		case "all":
			out = append(out, message{ID: "__remove_all__", Type: "remove"})
			live = nil
		}
	}
	return out
}
