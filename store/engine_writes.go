package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// PutWrites implements Store.
func (e *Engine) PutWrites(ctx context.Context, thread, ns string, seq int64, ws []Write) error {
	if err := e.check(thread, ns); err != nil {
		return err
	}
	for i, w := range ws {
		if w.Task == "" || !json.Valid(w.Update) {
			return fmt.Errorf("%w: write %d needs a task and a JSON update", ErrInvalidArgument, i)
		}
	}
	ws, err := e.sealWrites(ctx, thread, ns, seq, ws)
	if err != nil {
		return err
	}
	return e.b.PutWrites(ctx, thread, ns, seq, ws)
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
