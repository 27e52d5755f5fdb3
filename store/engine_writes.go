package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/store/driver"
)

// PutWrites implements Store.
func (e *Engine) PutWrites(ctx context.Context, thread, ns string, seq int64, ws []Write) error {
	if err := e.check(thread, ns); err != nil {
		return err
	}
	if err := checkWrites(ws); err != nil {
		return err
	}
	ws, err := e.sealWrites(ctx, thread, ns, seq, ws)
	if err != nil {
		return err
	}
	return e.b.PutWrites(ctx, thread, ns, seq, ws)
}

// stepWrites checks and seals the pending writes an append carries
// (Checkpoint.Writes) into its row.
func (e *Engine) stepWrites(ctx context.Context, cp Checkpoint, row *driver.Row) error {
	if len(cp.Writes) == 0 {
		return nil
	}
	if cp.WritesAt < 1 || cp.WritesAt > cp.Parent {
		return fmt.Errorf("%w: the writes an append carries belong to checkpoint %d, not one of its parent's line (parent %d)", ErrInvalidArgument, cp.WritesAt, cp.Parent)
	}
	if err := checkWrites(cp.Writes); err != nil {
		return err
	}
	ws, err := e.sealWrites(ctx, cp.Thread, cp.Namespace, cp.WritesAt, cp.Writes)
	if err != nil {
		return err
	}
	row.Writes, row.WritesAt = ws, cp.WritesAt
	return nil
}

func checkWrites(ws []Write) error {
	for i, w := range ws {
		if w.Task == "" || !json.Valid(w.Update) {
			return fmt.Errorf("%w: write %d needs a task and a JSON update", ErrInvalidArgument, i)
		}
	}
	return nil
}

// Writes implements Store.
func (e *Engine) Writes(ctx context.Context, thread, ns string, seq int64) ([]Write, error) {
	if err := e.check(thread, ns); err != nil {
		return nil, err
	}
	ws, err := e.b.Writes(ctx, thread, ns, seq)
	if err != nil {
		return nil, err
	}
	return e.openWrites(ctx, thread, ns, seq, ws)
}
