package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/store/driver"
)

// CopyingKey marks, in a thread's metadata, a copy still being made (its
// value is the source thread): CopyThread removes it when the copy is
// whole, so a copy cut short by a crash says so.
const CopyingKey = "cairn_copying"

// CopyThread copies a thread, every namespace and checkpoint with its
// pending writes, into a new thread with the same tenant and metadata:
// the copy has the same history (seqs, parents, states, metadata), so a
// pause in it waits on the same interrupt and a resumed step runs no
// completed task again. ErrConflict if the new thread exists. A copy of a
// pruned thread begins where what is left of its history begins.
func (e *Engine) CopyThread(ctx context.Context, from, to string) (Thread, error) {
	if err := e.check(from, ""); err != nil {
		return Thread{}, err
	}
	if err := ValidateThreadID(to); err != nil {
		return Thread{}, err
	}
	src, err := e.b.Thread(ctx, from)
	if err != nil {
		return Thread{}, err
	}
	if err := verifyThread(&src); err != nil {
		return Thread{}, err
	}
	if _, err := keyTenant(to, src.Tenant); err != nil {
		return Thread{}, err
	}
	md, err := e.copyingMetadata(src, from)
	if err != nil {
		return Thread{}, err
	}
	rec := driver.ThreadRecord{ID: to, Tenant: src.Tenant, Metadata: md, CreatedAt: e.now().UnixNano(), Status: ThreadIdle}
	rec.Sum = driver.ThreadChecksum(&rec)
	nss, err := e.b.Namespaces(ctx, from)
	if err != nil {
		return Thread{}, err
	}
	if len(nss) == 0 {
		if err := e.b.CreateThread(ctx, rec); err != nil {
			return Thread{}, err
		}
	}
	create := &rec
	for _, ns := range nss { // the root namespace first
		if err := e.copyNamespace(ctx, from, to, ns.Name, &create); err != nil {
			return Thread{}, err
		}
	}
	rec.Metadata = src.Metadata
	rec.Sum = driver.ThreadChecksum(&rec)
	if err := e.b.UpdateThread(ctx, rec); err != nil {
		return Thread{}, err
	}
	return e.Thread(ctx, to)
}

// copyingMetadata is the source's metadata with CopyingKey set.
func (e *Engine) copyingMetadata(src driver.ThreadRecord, from string) ([]byte, error) {
	md := map[string]any{}
	if len(src.Metadata) > 0 {
		if err := json.Unmarshal(src.Metadata, &md); err != nil {
			return nil, &CorruptError{Thread: from, What: "thread metadata", Err: err}
		}
	}
	md[CopyingKey] = from
	return json.Marshal(md)
}

// copyNamespace copies one namespace's rows, in seq order, and their
// writes; the first row copied creates the thread (*create, then nil).
func (e *Engine) copyNamespace(ctx context.Context, from, to, ns string, create **driver.ThreadRecord) error {
	rows, err := e.b.Rows(ctx, driver.RowQuery{Thread: from, Namespace: ns, Snapshots: true})
	if err != nil {
		return err
	}
	have := make(map[int64]bool, len(rows))
	var late map[int64]driver.Row
	if _, ok := e.b.(driver.SnapshotAttacher); ok {
		late = lateAttached(rows)
	}
	var attach []lateRow
	for i := range rows {
		r := rows[i]
		if err := verifyRow(&r); err != nil {
			return err
		}
		if r.Parent != 0 && !have[r.Parent] {
			r.Parent = 0 // pruned before the copy: a snapshot row, rebuilt on its own
		}
		have[r.Seq] = true
		if ns == "" && i == len(rows)-1 {
			// The copy's head: the thread's status and touch are its.
			st, err := e.copiedStatus(ctx, rows[i], from)
			if err != nil {
				return err
			}
			r.Head = &driver.HeadUpdate{Status: st}
		}
		r.Thread = to
		if *create != nil && r.Seq != 1 {
			// The source's first rows were pruned: a row after the first
			// creates no thread, so the thread (marked as a copy being
			// made) comes first.
			if err := e.b.CreateThread(ctx, **create); err != nil {
				return err
			}
			*create = nil
		}
		r.Create, r.NewThread = *create, *create != nil
		*create = nil
		// Encrypted blobs are bound to their thread: sealed again for the copy.
		if err := e.rebindRow(ctx, &r, from); err != nil {
			return err
		}
		r.Sum = driver.RowChecksum(&r)
		ins := r
		if c, ok := late[r.Seq]; ok {
			if ins, err = e.preAttach(ctx, r, c, from); err != nil {
				return err
			}
			attach = append(attach, lateRow{row: r, pre: ins.Sum})
		}
		if err := e.b.Insert(ctx, ins); err != nil {
			return fmt.Errorf("copying checkpoint %d of %q: %w", r.Seq, from, err)
		}
		ws, err := e.b.Writes(ctx, from, ns, r.Seq)
		if err != nil {
			return err
		}
		if len(ws) > 0 {
			if ws, err = e.rebindWrites(ctx, from, to, ns, r.Seq, ws); err != nil {
				return err
			}
			if err := e.b.PutWrites(ctx, to, ns, r.Seq, ws); err != nil {
				return err
			}
		}
	}
	for _, l := range attach {
		ok, err := e.b.(driver.SnapshotAttacher).AttachSnapshot(ctx, l.row, l.pre)
		if err != nil {
			return fmt.Errorf("copying the snapshot of checkpoint %d of %q: %w", l.row.Seq, from, err)
		}
		if !ok {
			return fmt.Errorf("%w: copying the snapshot of checkpoint %d of %q: the copy's row changed", ErrConflict, l.row.Seq, from)
		}
	}
	return nil
}

// lateRow is a row copied without its late snapshot (pre, the checksum
// of the row as inserted), which is attached once its children are in.
type lateRow struct {
	row driver.Row
	pre uint32
}

// lateAttached finds the rows whose snapshot was attached after a child
// of theirs was written (late snapshots, docs/DESIGN.md): such a child
// still replays from the base its parent had before (a fork from the
// parent, made before the attach), which an insert on the parent as it
// is now refuses (driver.BaseFits). It maps each to that child.
func lateAttached(rows []driver.Row) map[int64]driver.Row {
	bySeq := make(map[int64]int, len(rows))
	for i, r := range rows {
		bySeq[r.Seq] = i
	}
	late := map[int64]driver.Row{}
	for _, c := range rows {
		i, ok := bySeq[c.Parent]
		if !ok || c.Parent == 0 {
			continue
		}
		p := rows[i]
		if _, seen := late[p.Seq]; !seen && p.HasSnapshot && p.Base == p.Seq && !driver.BaseFits(&c, p.Base) {
			late[p.Seq] = c
		}
	}
	return late
}

// preAttach is row r as it was before its late snapshot, as its child c
// saw it: no snapshot, c's base, and the patch bytes since that base.
func (e *Engine) preAttach(ctx context.Context, r, c driver.Row, from string) (driver.Row, error) {
	c.Thread = from
	s, err := e.sealer(ctx, &c)
	if err != nil {
		return driver.Row{}, err
	}
	pre := r
	pre.HasSnapshot, pre.Snapshot = false, nil
	pre.Base, pre.BaseSize = c.Base, c.BaseSize
	pre.Since = c.Since - (int64(len(c.Patch)) - s.overhead())
	pre.Sum = driver.RowChecksum(&pre)
	return pre, nil
}

// copiedStatus is the thread status of a row of thread from read raw (its
// metadata opened when the store is encrypted).
func (e *Engine) copiedStatus(ctx context.Context, r driver.Row, from string) (ThreadStatus, error) {
	r.Thread, r.Snapshot = from, nil
	src := []driver.Row{r}
	if err := e.openRows(ctx, src); err != nil {
		return 0, err
	}
	st, _ := driver.RowThreadStatus(&src[0])
	return st, nil
}
