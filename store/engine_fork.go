package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/store/driver"
)

// Fork implements Store.
func (e *Engine) Fork(ctx context.Context, r ForkRequest) (Checkpoint, error) {
	if err := e.check(r.Thread, r.Namespace); err != nil {
		return Checkpoint{}, err
	}
	if r.At <= 0 {
		return Checkpoint{}, fmt.Errorf("%w: fork needs a checkpoint seq, got %d", ErrInvalidArgument, r.At)
	}
	if r.Into != "" {
		if err := ValidateThreadID(r.Into); err != nil {
			return Checkpoint{}, err
		}
	}
	src, err := e.Load(ctx, LoadRequest{Thread: r.Thread, Namespace: r.Namespace, Seq: r.At})
	if err != nil {
		return Checkpoint{}, err
	}
	if src.Status == StatusFailed || src.Status == StatusInterrupted {
		return Checkpoint{}, fmt.Errorf("%w: thread %q checkpoint %d is %s; fork from the checkpoint it resumes (%d)", ErrInvalidArgument, r.Thread, r.At, src.Status, src.Meta.StepOf)
	}
	st := src.State
	if len(r.Patch) > 0 {
		if st, err = st.Apply(r.Patch); err != nil {
			return Checkpoint{}, fmt.Errorf("%w: fork patch: %v", ErrInvalidArgument, err)
		}
	}
	cp := Checkpoint{Thread: r.Thread, Namespace: r.Namespace, Parent: r.At, Nodes: r.Nodes, Status: StatusSuccess, Patch: r.Patch, State: st, Meta: forkMeta(r.Meta, &src), ExternalID: r.ExternalID}
	if r.Into == "" {
		head, err := e.head(ctx, r.Thread, r.Namespace)
		if err != nil {
			return Checkpoint{}, err
		}
		at, err := e.info(ctx, r.Thread, r.Namespace, r.At)
		if err != nil {
			return Checkpoint{}, err
		}
		// The branch's parent is not the head: what the thread's listing
		// columns hold is not known from it.
		at.status, at.touched = ThreadStatusUnknown, 0
		return e.insertOn(ctx, cp, head+1, at)
	}
	rec, err := e.forkThread(ctx, r)
	if err != nil {
		return Checkpoint{}, err
	}
	// The whole state is the new thread's first patch, so replaying the
	// thread from nothing gives the same state as its snapshot. The thread
	// record goes in the same transaction as the row: a crash never leaves
	// an empty thread behind.
	cp.Thread, cp.Parent = r.Into, 0
	cp.Patch = st.AsPatch()
	// The new thread's record is written idle, touched at its creation.
	return e.insert(ctx, cp, 1, rowInfo{status: ThreadIdle, touched: rec.CreatedAt}, &rec, true)
}

// forkMeta is the metadata of a fork checkpoint: the request's, marked as a
// fork of src, with src's schedule when the request gives none.
func forkMeta(m Meta, src *Checkpoint) Meta {
	if m.Source == "" {
		m.Source = "fork"
	}
	ref := src.Ref()
	m.ForkedFrom = &ref
	if m.Next == nil && m.Tasks == nil {
		m.Next, m.Tasks = src.Meta.Next, src.Meta.Tasks
	}
	return m
}

// forkThread builds the record of the thread a fork creates: the source
// thread's tenant, and its metadata unless the request gives new metadata.
func (e *Engine) forkThread(ctx context.Context, r ForkRequest) (driver.ThreadRecord, error) {
	srcRec, err := e.b.Thread(ctx, r.Thread)
	if err != nil {
		return driver.ThreadRecord{}, err
	}
	if err := verifyThread(&srcRec); err != nil {
		return driver.ThreadRecord{}, err
	}
	if _, err := keyTenant(r.Into, srcRec.Tenant); err != nil {
		return driver.ThreadRecord{}, err
	}
	rec := driver.ThreadRecord{ID: r.Into, Tenant: srcRec.Tenant, Metadata: srcRec.Metadata, CreatedAt: e.now().UnixNano()}
	if r.Metadata != nil {
		rec.Metadata = nil
		if len(r.Metadata) > 0 {
			if rec.Metadata, err = json.Marshal(r.Metadata); err != nil {
				return driver.ThreadRecord{}, fmt.Errorf("%w: fork thread metadata: %v", ErrInvalidArgument, err)
			}
		}
	}
	rec.Sum = driver.ThreadChecksum(&rec)
	return rec, nil
}
