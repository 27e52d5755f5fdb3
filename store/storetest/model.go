package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// model mirrors what a runner does: apply an update, append the checkpoint,
// and remember the expected state of every seq.
type model struct {
	t      *testing.T
	s      store.Store
	thread string
	ns     string
	head   int64
	doc    state.Doc
	want   map[int64]string
	ids    []string // message ids in doc
}

func newModel(t *testing.T, s store.Store, thread string) *model {
	return &model{t: t, s: s, thread: thread, want: map[int64]string{}}
}

func content(thread string, i int) string {
	c := fmt.Sprintf("t%s-step-%d-", thread, i)
	return c + strings.Repeat("x", max(0, 200-len(c)))
}

// step appends one W1-like step, with now and then a kv write, a message
// edit or a removal so patches are not all appends.
func (m *model) step(i int) store.Checkpoint {
	m.t.Helper()
	upd := state.Update{
		"messages": state.Message{ID: fmt.Sprintf("%s-m%d", m.thread, i), Role: "assistant", Content: content(m.thread, i)},
		"count":    i,
		"total":    1,
	}
	switch {
	case i%7 == 0:
		upd["kv"] = map[string]any{fmt.Sprintf("k%d", i%3): i, "gone": nil}
	case i%11 == 0 && len(m.ids) >= 2:
		last, first := m.ids[len(m.ids)-1], m.ids[0]
		m.ids = m.ids[:len(m.ids)-1]
		upd["messages"] = []state.Message{state.RemoveMessage(last), {ID: first, Content: "edited"}}
		return m.apply(upd, []string{"step"})
	}
	m.ids = append(m.ids, fmt.Sprintf("%s-m%d", m.thread, i))
	return m.apply(upd, []string{"step"})
}

func (m *model) apply(upd state.Update, nodes []string) store.Checkpoint {
	m.t.Helper()
	doc, patch, err := schema.Apply(m.doc, upd, state.ApplyOptions{NewID: func() string { return "id" }})
	if err != nil {
		m.t.Fatalf("apply: %v", err)
	}
	cp, err := m.s.Append(context.Background(), store.Checkpoint{
		Thread: m.thread, Namespace: m.ns, Parent: m.head, Nodes: nodes, Patch: patch, State: doc,
		Meta: store.Meta{Source: "step", Next: []string{"step"}},
	})
	if err != nil {
		m.t.Fatalf("append after %d: %v", m.head, err)
	}
	if cp.Seq != m.head+1 {
		m.t.Fatalf("append seq = %d, want %d", cp.Seq, m.head+1)
	}
	m.head, m.doc = cp.Seq, doc
	m.want[cp.Seq] = doc.String()
	return cp
}

func (m *model) checkLoad(seq int64) {
	m.t.Helper()
	cp, err := m.s.Load(context.Background(), store.LoadRequest{Thread: m.thread, Namespace: m.ns, Seq: seq})
	if err != nil {
		m.t.Fatalf("load %d: %v", seq, err)
	}
	want := m.want[seq]
	if seq == 0 {
		want = m.want[m.head]
	}
	if got := cp.State.String(); got != want {
		m.t.Fatalf("load %d: state\n got %.300s\nwant %.300s", seq, got, want)
	}
}

// checkAll loads every checkpoint the model appended.
func (m *model) checkAll() {
	m.t.Helper()
	for seq := range m.want {
		m.checkLoad(seq)
	}
}

// settle waits for the snapshots an engine writes after their commits.
func settle(s store.Store) {
	if e, ok := s.(*store.Engine); ok {
		e.WaitSnapshots()
	}
}

func messageIDs(t *testing.T, d state.Doc) []string {
	var msgs []state.Message
	if err := d.Get("messages", &msgs); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}
