package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/store/driver"
)

// ImportingKey marks, in a thread's metadata, a thread an import into a
// backend without driver.ThreadLoader is still writing (its value is the
// bundle's thread id): the import removes it when the thread is whole, and
// deletes the thread when a write fails.
const ImportingKey = "cairn_importing"

// writeLoad writes an imported thread: in one transaction on a
// driver.ThreadLoader, else row by row under ImportingKey.
func (e *Engine) writeLoad(ctx context.Context, load driver.ThreadLoad, source string) error {
	if l, ok := e.b.(driver.ThreadLoader); ok {
		return l.LoadThread(ctx, load)
	}
	marked := load.Thread
	md := map[string]any{}
	if len(marked.Metadata) > 0 {
		if err := json.Unmarshal(marked.Metadata, &md); err != nil {
			return fmt.Errorf("%w: thread metadata: %v", ErrInvalidArgument, err)
		}
	}
	md[ImportingKey] = source
	b, err := json.Marshal(md)
	if err != nil {
		return err
	}
	marked.Metadata = b
	marked.Sum = driver.ThreadChecksum(&marked)
	if err := e.b.CreateThread(ctx, marked); err != nil {
		return err
	}
	if err := e.writeRows(ctx, load); err != nil {
		// Nothing half-made is left: the thread goes, with its rows and runs.
		_ = e.b.DeleteThread(context.WithoutCancel(ctx), load.Thread.ID)
		e.forget(load.Thread.ID)
		return err
	}
	if err := e.b.UpdateThread(ctx, load.Thread); err != nil {
		return err
	}
	return nil
}

// writeRows writes a load's rows, writes and runs one by one.
func (e *Engine) writeRows(ctx context.Context, load driver.ThreadLoad) error {
	key := load.Thread.ID
	written := map[[2]any]bool{}
	for _, r := range load.Rows {
		if r.Parent != 0 && !written[[2]any{r.Namespace, r.Parent}] {
			// Pruned before the export: Insert needs a parent, so the row
			// is stored as a root, as CopyThread stores it.
			r.Parent = 0
			r.Sum = driver.RowChecksum(&r)
		}
		written[[2]any{r.Namespace, r.Seq}] = true
		if err := e.b.Insert(ctx, r); err != nil {
			return fmt.Errorf("importing checkpoint %d of namespace %q: %w", r.Seq, r.Namespace, err)
		}
	}
	for _, w := range load.Writes {
		if err := e.b.PutWrites(ctx, key, w.Namespace, w.Seq, w.Writes); err != nil {
			return err
		}
	}
	if len(load.Runs) == 0 {
		return nil
	}
	rl, ok := e.b.(RunLog)
	if !ok {
		return fmt.Errorf("%w: this store keeps no runs", ErrInvalidArgument)
	}
	for _, r := range load.Runs {
		rec := RunRecord{ID: r.ID, Thread: key, Tenant: load.Thread.Tenant, Status: r.Status, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Data: r.Data}
		if err := rl.PutRun(ctx, rec); err != nil {
			return err
		}
		evs := make([]EventRecord, len(r.Events))
		for i, ev := range r.Events {
			evs[i] = EventRecord{Seq: ev.Seq, Data: ev.Data}
		}
		if len(evs) > 0 {
			if err := rl.AppendEvents(ctx, r.ID, evs); err != nil {
				return err
			}
		}
	}
	return nil
}
