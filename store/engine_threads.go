package store

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"time"

	"github.com/cairn-dev/cairn/store/driver"
)

// CreateThread implements Store.
func (e *Engine) CreateThread(ctx context.Context, t Thread) (Thread, error) {
	if err := e.check(t.ID, ""); err != nil {
		return Thread{}, err
	}
	tenant, err := keyTenant(t.ID, t.Tenant)
	if err != nil {
		return Thread{}, err
	}
	rec := driver.ThreadRecord{ID: t.ID, Tenant: tenant, CreatedAt: e.now().UnixNano(), Status: ThreadIdle}
	if len(t.Metadata) > 0 {
		b, err := json.Marshal(t.Metadata)
		if err != nil {
			return Thread{}, fmt.Errorf("%w: thread metadata: %v", ErrInvalidArgument, err)
		}
		rec.Metadata = b
	}
	rec.Sum = driver.ThreadChecksum(&rec)
	if err := e.b.CreateThread(ctx, rec); err != nil {
		return Thread{}, err
	}
	e.rememberEmpty(rec.ID, rec.CreatedAt)
	return threadFromRecord(rec)
}

// rememberEmpty notes what a thread this engine created without a
// checkpoint holds in its listing columns (idle, touched at its creation),
// as the parent of its first root row: a first commit soon after needs
// not write them.
func (e *Engine) rememberEmpty(id string, created int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.heads) >= maxCachedHeads {
		clear(e.heads)
	}
	e.heads[headKey{id, ""}] = rowInfo{status: ThreadIdle, touched: created}
}

func threadFromRecord(r driver.ThreadRecord) (Thread, error) {
	if err := verifyThread(&r); err != nil {
		return Thread{}, err
	}
	t := Thread{ID: r.ID, Tenant: r.Tenant, CreatedAt: time.Unix(0, r.CreatedAt), Head: r.Head, Status: r.Status}
	t.UpdatedAt = t.CreatedAt
	if r.Head > 0 {
		t.UpdatedAt = time.Unix(0, r.HeadAt)
	}
	if len(r.Metadata) > 0 {
		if err := json.Unmarshal(r.Metadata, &t.Metadata); err != nil {
			return Thread{}, &CorruptError{Thread: r.ID, What: "thread metadata", Err: err}
		}
	}
	return t, nil
}

// Thread implements Store.
func (e *Engine) Thread(ctx context.Context, id string) (Thread, error) {
	if err := e.check(id, ""); err != nil {
		return Thread{}, err
	}
	rec, err := e.b.Thread(ctx, id)
	if err != nil {
		return Thread{}, err
	}
	t, err := threadFromRecord(rec)
	if err == nil {
		err = e.knownStatus(ctx, &t)
	}
	return t, err
}

// Threads implements Store.
func (e *Engine) Threads(ctx context.Context, f ThreadFilter) iter.Seq2[Thread, error] {
	return func(yield func(Thread, error) bool) {
		if e.closed.Load() {
			yield(Thread{}, ErrClosed)
			return
		}
		q := driver.ThreadQuery{Tenant: f.Tenant, Limit: f.PageSize}
		if q.Limit <= 0 {
			q.Limit = 100
		}
		if f.Limit > 0 && f.Limit < q.Limit {
			q.Limit = f.Limit // one page holds the whole listing
		}
		if len(f.Metadata) > 0 {
			q.Metadata = make(map[string]json.RawMessage, len(f.Metadata))
			for k, v := range f.Metadata {
				b, err := marshalPlain(v)
				if err != nil || (len(b) > 0 && (b[0] == '{' || b[0] == '[')) {
					yield(Thread{}, fmt.Errorf("%w: metadata filter %q must be a JSON scalar", ErrInvalidArgument, k))
					return
				}
				q.Metadata[k] = b
			}
			lq, err := listQuery(ThreadSearch{Metadata: f.Metadata})
			if err != nil {
				yield(Thread{}, err)
				return
			}
			q.Meta = lq.Meta
		}
		n := 0
		for {
			page, err := e.b.Threads(ctx, q)
			if err != nil {
				yield(Thread{}, err)
				return
			}
			for _, rec := range page {
				t, err := threadFromRecord(rec)
				if !yield(t, err) {
					return
				}
				if n++; f.Limit > 0 && n >= f.Limit {
					return
				}
			}
			if len(page) < q.Limit {
				return
			}
			q.After = page[len(page)-1].ID
		}
	}
}

// SetMetadata implements Store.
func (e *Engine) SetMetadata(ctx context.Context, id string, md map[string]any) (Thread, error) {
	if err := e.check(id, ""); err != nil {
		return Thread{}, err
	}
	rec, err := e.b.Thread(ctx, id)
	if err != nil {
		return Thread{}, err
	}
	if err := verifyThread(&rec); err != nil {
		return Thread{}, err
	}
	rec.Metadata = nil
	if len(md) > 0 {
		if rec.Metadata, err = json.Marshal(md); err != nil {
			return Thread{}, fmt.Errorf("%w: thread metadata: %v", ErrInvalidArgument, err)
		}
	}
	rec.Sum = driver.ThreadChecksum(&rec)
	if err := e.b.UpdateThread(ctx, rec); err != nil {
		return Thread{}, err
	}
	return threadFromRecord(rec)
}

// DeleteThread implements Store.
func (e *Engine) DeleteThread(ctx context.Context, id string) error {
	if err := e.check(id, ""); err != nil {
		return err
	}
	if err := e.deleteInbox(ctx, id); err != nil {
		return err
	}
	e.forget(id)
	e.crypt.forget(id)
	e.cache.dropThread(id)
	return e.b.DeleteThread(ctx, id)
}

// EmptyThread deletes every checkpoint of a thread, with their snapshots
// and pending writes, and keeps the thread, its metadata and its runs:
// the thread is as it was before its first checkpoint, and at no moment
// does it not exist (DeleteThread and CreateThread would leave a moment
// when it does not). A namespace that grows meanwhile is ErrConflict.
func (e *Engine) EmptyThread(ctx context.Context, id string) error {
	if err := e.check(id, ""); err != nil {
		return err
	}
	e.WaitSnapshots()
	if err := e.deleteInbox(ctx, id); err != nil {
		return err
	}
	nss, err := e.b.Namespaces(ctx, id)
	if err != nil {
		return err
	}
	defer e.forget(id)
	defer e.cache.dropThread(id)
	for _, ns := range nss {
		if _, err := e.b.DeleteRanges(ctx, id, ns.Name, ns.Head, []driver.SeqRange{{From: 1, To: ns.Head}}, nil); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) forget(thread string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.heads {
		if k.thread == thread {
			delete(e.heads, k)
		}
	}
}

// Namespaces implements Store.
func (e *Engine) Namespaces(ctx context.Context, thread string) ([]NamespaceInfo, error) {
	if err := e.check(thread, ""); err != nil {
		return nil, err
	}
	if _, err := e.Thread(ctx, thread); err != nil {
		return nil, err
	}
	recs, err := e.b.Namespaces(ctx, thread)
	if err != nil {
		return nil, err
	}
	out := make([]NamespaceInfo, 0, len(recs))
	for _, rec := range recs {
		// The head row, checked against its checksum, gives the time.
		rows, err := e.rows(ctx, driver.RowQuery{Thread: thread, Namespace: rec.Name, From: rec.Head, To: rec.Head})
		if err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			continue // deleted meanwhile
		}
		out = append(out, NamespaceInfo{Name: rec.Name, Head: rec.Head, Checkpoints: rec.Count, UpdatedAt: time.Unix(0, rows[0].CreatedAt)})
	}
	return out, nil
}
