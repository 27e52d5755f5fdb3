package store

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/store/driver"
)

// RekeyStats counts what Rekey did.
type RekeyStats struct {
	// Key is the id of the key every blob is now sealed with.
	Key string `json:"key"`
	// Rewritten counts the blobs sealed again, by kind: "checkpoints"
	// (rows: their patch and metadata), "snapshots", "writes", "runs",
	// "events", "items".
	Rewritten map[string]int64 `json:"rewritten"`
	// Current counts the blobs that were sealed with the newest key already.
	Current int64 `json:"current"`
	// Changed counts blobs changed or deleted by another process between
	// the read and the rewrite (left as that process wrote them; another
	// pass reads them again).
	Changed int64 `json:"changed"`
	// Passes is how many passes over the store were made.
	Passes int `json:"passes"`
}

const rekeyPasses = 3

// Rekey seals every blob of the store with the newest key of its keyring
// (Options.Keyring), opening old blobs with any key of the ring — or, for
// blobs not encrypted yet, taking them as they are: a plaintext store is
// encrypted by Rekey. It works online, row by row, each rewrite a
// compare-and-swap; a blob another process changed meanwhile is read again
// by a further pass (up to three). Afterwards keys other than the newest
// can be dropped from the keyring. The blobs of threads format 7 moved to
// their keys (tenant/id), still sealed under the threads' bare ids, are
// sealed again under the keys, with the newest key already or not: after
// Rekey no blob needs the fallback to its bare id (see the comment on
// sealed blobs in crypt.go).
func (e *Engine) Rekey(ctx context.Context) (RekeyStats, error) {
	if e.closed.Load() {
		return RekeyStats{}, ErrClosed
	}
	ring := e.crypt.ring
	if ring == nil {
		return RekeyStats{}, fmt.Errorf("%w: rekey needs encryption keys (set %s)", ErrNoKey, EnvEncryptionKeys)
	}
	bw, ok := e.b.(driver.BlobRewriter)
	if !ok {
		return RekeyStats{}, fmt.Errorf("%w: this backend cannot rewrite its blobs", ErrInvalidArgument)
	}
	st := RekeyStats{Key: ring.KeyIDs()[0], Rewritten: map[string]int64{}}
	for st.Passes < rekeyPasses {
		st.Passes++
		changed := st.Changed
		r := rekeyer{e: e, bw: bw, ring: ring, st: &st}
		if err := r.pass(ctx); err != nil {
			return st, err
		}
		if st.Changed == changed {
			break
		}
	}
	return st, nil
}

// rekeyer is one pass of Rekey.
type rekeyer struct {
	e    *Engine
	bw   driver.BlobRewriter
	ring *Keyring
	st   *RekeyStats
}

func (r *rekeyer) pass(ctx context.Context) error {
	q := driver.ThreadQuery{Limit: 100}
	for {
		page, err := r.e.b.Threads(ctx, q)
		if err != nil {
			return err
		}
		for i := range page {
			if err := r.thread(ctx, &page[i]); err != nil {
				return err
			}
		}
		if len(page) < q.Limit {
			break
		}
		q.After = page[len(page)-1].ID
	}
	if err := r.runs(ctx); err != nil {
		return err
	}
	return r.items(ctx)
}

// reseal returns blob sealed with the newest key under binding b, or nil
// when it is already. A blob sealed with the newest key but under its
// pre-format 7 binding (a thread the migration keyed) is sealed again
// under b.
func (r *rekeyer) reseal(b *binding, blob []byte) ([]byte, error) {
	if r.ring.current(blob) && !r.legacyBound(b, blob) {
		r.st.Current++
		return nil, nil
	}
	plain := blob
	if isSealed(blob) {
		var err error
		if plain, err = r.ring.open(b, blob); err != nil {
			return nil, err
		}
	}
	return r.ring.seal(b, plain), nil
}

// legacyBound reports whether a blob of the newest key opens only under
// b's legacy binding. Only blobs of keyed threads have one; a blob that
// opens under neither is left as it is, as every current blob is.
func (r *rekeyer) legacyBound(b *binding, blob []byte) bool {
	if _, ok := b.legacy(); !ok {
		return false
	}
	_, legacy, err := r.ring.openBound(b, blob)
	return err == nil && legacy
}

// count adds the outcome of one compare-and-swap.
func (r *rekeyer) count(kind string, swapped bool, err error) error {
	switch {
	case err != nil:
		return err
	case swapped:
		r.st.Rewritten[kind]++
	default:
		r.st.Changed++
	}
	return nil
}

func (r *rekeyer) thread(ctx context.Context, t *driver.ThreadRecord) error {
	if err := verifyThread(t); err != nil {
		return err
	}
	nss, err := r.e.b.Namespaces(ctx, t.ID)
	if err != nil {
		return err
	}
	for _, ns := range nss {
		if err := r.namespace(ctx, t, ns.Name, ns.Head); err != nil {
			return err
		}
	}
	ws, err := r.bw.ThreadWrites(ctx, t.ID)
	if err != nil {
		return err
	}
	for _, w := range ws {
		b := binding{kind: sealWrite, tenant: t.Tenant, thread: w.Thread, ns: w.Namespace, seq: w.Seq, key: w.Task}
		nw, err := r.reseal(&b, w.Data)
		if err != nil {
			return &CorruptError{Thread: w.Thread, Namespace: w.Namespace, Seq: w.Seq, What: fmt.Sprintf("pending write %q", w.Task), Err: err}
		}
		if nw != nil {
			ok, err := r.bw.RewriteWrite(ctx, w, nw)
			if err := r.count("writes", ok, err); err != nil {
				return err
			}
		}
	}
	r.e.cache.dropThread(t.ID)
	return nil
}

const rekeyPage = 64

func (r *rekeyer) namespace(ctx context.Context, t *driver.ThreadRecord, ns string, head int64) error {
	for from := int64(1); from <= head; from += rekeyPage {
		rows, err := r.e.b.Rows(ctx, driver.RowQuery{Thread: t.ID, Namespace: ns, From: from, To: from + rekeyPage - 1, Snapshots: true})
		if err != nil {
			return err
		}
		for i := range rows {
			if err := r.row(ctx, t.Tenant, &rows[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *rekeyer) row(ctx context.Context, tenant string, old *driver.Row) error {
	if err := verifyRow(old); err != nil {
		return err
	}
	corrupt := func(what string, err error) error {
		return &CorruptError{Thread: old.Thread, Namespace: old.Namespace, Seq: old.Seq, What: what, Err: err}
	}
	nw := *old
	nw.Snapshot = nil
	b := binding{kind: sealPatch, tenant: tenant, thread: old.Thread, ns: old.Namespace, seq: old.Seq}
	patch, err := r.resealPatch(&b, old)
	if err != nil {
		return corrupt("patch", err)
	}
	if patch != nil {
		nw.Patch, nw.Meta = patch, nil
	}
	var snap []byte
	if len(old.Snapshot) > 0 {
		b.kind = sealSnapshot
		if snap, err = r.reseal(&b, old.Snapshot); err != nil {
			return corrupt("snapshot", err)
		}
	}
	if patch == nil && snap == nil {
		return nil
	}
	if snap != nil {
		nw.Snapshot, nw.BaseSize = snap, int64(len(snap))
	}
	nw.Sum = driver.RowChecksum(&nw)
	ok, err := r.bw.RewriteRow(ctx, *old, nw)
	if err := r.count("checkpoints", ok, err); err != nil {
		return err
	}
	if ok && snap != nil {
		r.st.Rewritten["snapshots"]++
	}
	return nil
}

// resealPatch returns a row's patch blob sealed with the newest key, its
// metadata inside (joinMeta), or nil when it is already.
func (r *rekeyer) resealPatch(b *binding, old *driver.Row) ([]byte, error) {
	if !isSealed(old.Patch) {
		return r.ring.seal(b, joinMeta(old.Meta, old.Patch)), nil // a plaintext row
	}
	if len(old.Meta) > 0 {
		return nil, fmt.Errorf("metadata: %w", errPlaintext)
	}
	return r.reseal(b, old.Patch)
}

func (r *rekeyer) runs(ctx context.Context) error {
	rl, ok := r.e.b.(RunLog)
	if !ok {
		return nil
	}
	const page = 100
	for off := 0; ; off += page {
		runs, err := rl.Runs(ctx, RunQuery{Limit: page, Offset: off})
		if err != nil {
			return err
		}
		for i := range runs {
			if err := r.run(ctx, rl, &runs[i]); err != nil {
				return err
			}
		}
		if len(runs) < page {
			return nil
		}
	}
}

func (r *rekeyer) run(ctx context.Context, rl RunLog, run *RunRecord) error {
	b := runBinding(run)
	nw, err := r.reseal(&b, run.Data)
	if err != nil {
		return &CorruptError{Thread: run.Thread, What: fmt.Sprintf("run record %q", run.ID), Err: err}
	}
	if nw != nil {
		ok, err := r.bw.RewriteRun(ctx, run.ID, run.Data, nw)
		if err := r.count("runs", ok, err); err != nil {
			return err
		}
	}
	for after := int64(0); ; {
		evs, err := rl.Events(ctx, run.ID, after, 500)
		if err != nil || len(evs) == 0 {
			return err
		}
		for _, ev := range evs {
			b := eventBinding(run.ID, ev.Seq)
			nw, err := r.reseal(&b, ev.Data)
			if err != nil {
				return &CorruptError{Seq: ev.Seq, What: fmt.Sprintf("event of run %q", run.ID), Err: err}
			}
			if nw != nil {
				ok, err := r.bw.RewriteEvent(ctx, run.ID, ev.Seq, ev.Data, nw)
				if err := r.count("events", ok, err); err != nil {
					return err
				}
			}
		}
		after = evs[len(evs)-1].Seq
	}
}
