package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// ErrHistoryDiverged: results to append do not continue the stored ones.
var ErrHistoryDiverged = errors.New("agent: history diverged")

// History is AgentKit's history adapter over a Cairn store: a thread's
// messages and inference results, kept across runs (AgentKit keeps them for
// one run only). Every write is a checkpoint, so history has the store's
// guarantees: atomic, durable, one writer per thread.
type History struct {
	Store  store.Store
	Schema *state.Schema // default NetworkSchema()
}

// Conversation is a thread's history.
type Conversation struct {
	Thread   string
	Head     int64
	Messages []Message
	Results  []InferenceResult
}

func (h *History) schema() *state.Schema {
	if h.Schema != nil {
		return h.Schema
	}
	return NetworkSchema()
}

// CreateThread creates an empty thread with metadata.
func (h *History) CreateThread(ctx context.Context, id string, metadata map[string]any) (store.Thread, error) {
	return h.Store.CreateThread(ctx, store.Thread{ID: id, Metadata: metadata})
}

// Load returns the thread's messages and results (empty for a thread
// without checkpoints).
func (h *History) Load(ctx context.Context, thread string) (Conversation, error) {
	c := Conversation{Thread: thread}
	cp, err := h.Store.Load(ctx, store.LoadRequest{Thread: thread})
	if errors.Is(err, store.ErrNotFound) {
		if _, terr := h.Store.Thread(ctx, thread); terr != nil {
			return c, terr
		}
		return c, nil
	}
	if err != nil {
		return c, err
	}
	c.Head = cp.Seq
	if cp.State.Has(FieldMessages) {
		if err := cp.State.Get(FieldMessages, &c.Messages); err != nil {
			return c, err
		}
	}
	if cp.State.Has(FieldResults) {
		if err := cp.State.Get(FieldResults, &c.Results); err != nil {
			return c, err
		}
	}
	return c, nil
}

// AppendUserMessage adds a user message to the thread.
func (h *History) AppendUserMessage(ctx context.Context, thread, text string) (store.Checkpoint, error) {
	return h.append(ctx, thread, state.Update{FieldMessages: Message{Role: RoleUser, Content: text}}, "history:user")
}

// AppendResults stores the results of a run that are not stored yet: all
// must begin with the stored results (else ErrHistoryDiverged); the rest
// are appended, with their output messages, in one checkpoint. It returns
// how many were new.
func (h *History) AppendResults(ctx context.Context, thread string, all []InferenceResult) (int, error) {
	cur, err := h.Load(ctx, thread)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	if len(all) < len(cur.Results) {
		return 0, fmt.Errorf("%w: %d results given, %d stored", ErrHistoryDiverged, len(all), len(cur.Results))
	}
	for i := range cur.Results {
		a, _ := json.Marshal(cur.Results[i]) // results are plain data
		b, _ := json.Marshal(all[i])
		if !bytes.Equal(a, b) {
			return 0, fmt.Errorf("%w: result %d differs from the stored one", ErrHistoryDiverged, i)
		}
	}
	fresh := all[len(cur.Results):]
	if len(fresh) == 0 {
		return 0, nil
	}
	var msgs []Message
	for _, r := range fresh {
		msgs = append(msgs, r.Output...)
	}
	upd := state.Update{FieldResults: fresh}
	if len(msgs) > 0 {
		upd[FieldMessages] = msgs
	}
	if _, err := h.append(ctx, thread, upd, "history:results"); err != nil {
		return 0, err
	}
	return len(fresh), nil
}

func (h *History) append(ctx context.Context, thread string, upd state.Update, node string) (store.Checkpoint, error) {
	doc := state.EmptyDoc()
	var head int64
	cp, err := h.Store.Load(ctx, store.LoadRequest{Thread: thread})
	switch {
	case err == nil:
		doc, head = cp.State, cp.Seq
	case !errors.Is(err, store.ErrNotFound):
		return store.Checkpoint{}, err
	}
	next, patch, err := h.schema().Apply(doc, upd, state.ApplyOptions{NewID: func() func() string {
		n := 0
		return func() string { n++; return fmt.Sprintf("%s/%d/%s/%d", thread, head+1, node, n) }
	}()})
	if err != nil {
		return store.Checkpoint{}, err
	}
	return h.Store.Append(ctx, store.Checkpoint{Thread: thread, Parent: head, Nodes: []string{node}, Patch: patch, State: next, Meta: store.Meta{Source: "update"}})
}
