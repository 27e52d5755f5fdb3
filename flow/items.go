package flow

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/store"
)

// Items returns the long-term memory store of the running node (and of the
// tools it calls), scoped to the tenant of the run's thread: a node never
// reaches another tenant's items. It is Options.Items, or the items of
// the runner's store. The values it writes go through the run's redactor
// (Options.Redact) first, as state updates do. Outside a node it fails
// with ErrInvalidGraph.
func Items(ctx context.Context) (store.ItemStore, error) {
	t := taskOf(ctx)
	if t == nil || t.runner == nil {
		return nil, fmt.Errorf("%w: flow.Items called outside a node", ErrInvalidGraph)
	}
	is := t.runner.opts.Items
	if is == nil {
		var err error
		if is, err = store.ItemsOf(t.runner.s); err != nil {
			return nil, err
		}
	}
	th, err := Thread(ctx)
	if err != nil {
		return nil, err
	}
	is = store.ForTenant(is, th.Tenant)
	if r := t.runner.opts.Redact; r != nil {
		is = redactedItems{ItemStore: is, r: r}
	}
	return is, nil
}

// redactedItems hides secrets in the values it writes.
type redactedItems struct {
	store.ItemStore
	r *redact.Redactor
}

func (ri redactedItems) value(op store.PutOp) store.PutOp {
	if m, ok := ri.r.Value(op.Value).(map[string]any); ok {
		op.Value = m
	}
	return op
}

func (ri redactedItems) Put(ctx context.Context, op store.PutOp) error {
	return ri.ItemStore.Put(ctx, ri.value(op))
}

func (ri redactedItems) Batch(ctx context.Context, ops []store.ItemOp) ([]store.ItemResult, error) {
	out := make([]store.ItemOp, len(ops))
	for i, op := range ops {
		if p, ok := op.(store.PutOp); ok {
			op = ri.value(p)
		}
		out[i] = op
	}
	return ri.ItemStore.Batch(ctx, out)
}

// Thread returns the record of the running node's thread: its tenant and
// metadata. A thread a run created by its first checkpoint, without a
// record made beforehand, has only its id. Outside a node it fails with
// ErrInvalidGraph.
func Thread(ctx context.Context) (store.Thread, error) {
	t := taskOf(ctx)
	if t == nil || t.runner == nil {
		return store.Thread{}, fmt.Errorf("%w: flow.Thread called outside a node", ErrInvalidGraph)
	}
	th, err := t.runner.s.Thread(ctx, t.info.Thread)
	if errors.Is(err, store.ErrNotFound) {
		return store.Thread{ID: t.info.Thread}, nil
	}
	return th, err
}
