package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cairn-dev/cairn/store/driver"
)

// importBundle implements ImportBundle: read and check everything, build
// every row, then write.
func (e *Engine) importBundle(ctx context.Context, r io.Reader, opts ImportOptions) (BundleInfo, error) {
	if e.closed.Load() {
		return BundleInfo{}, ErrClosed
	}
	if opts.Tenant != "" {
		if err := ValidateID(opts.Tenant); err != nil {
			return BundleInfo{}, fmt.Errorf("tenant: %w", err)
		}
	}
	if opts.As != "" {
		if err := ValidateID(opts.As); err != nil {
			return BundleInfo{}, fmt.Errorf("new thread id: %w", err)
		}
	}
	b, p, err := readBundle(r, opts.MaxBytes)
	if err != nil {
		return BundleInfo{}, err
	}
	id := p.man.Thread
	if opts.As != "" {
		id = opts.As
	}
	key := ThreadKey(opts.Tenant, id)
	if err := e.check(key, ""); err != nil {
		return BundleInfo{}, err
	}
	if _, err := e.b.Thread(ctx, key); err == nil {
		return BundleInfo{}, fmt.Errorf("%w: thread %q exists", ErrConflict, id)
	} else if !errors.Is(err, ErrNotFound) {
		return BundleInfo{}, err
	}
	load, err := e.buildLoad(ctx, p, key, opts.Tenant, id)
	if err != nil {
		return BundleInfo{}, err
	}
	if err := e.writeLoad(ctx, load, p.man.Thread); err != nil {
		return BundleInfo{}, err
	}
	// What this engine remembered of a thread of that key (deleted since)
	// is not the imported thread's.
	e.forget(key)
	e.crypt.forget(key)
	info := BundleInfo{Thread: key, Source: p.man.Thread, Namespaces: len(p.man.Namespaces), Checkpoints: len(load.Rows), Runs: len(load.Runs), Bytes: int64(len(b))}
	for _, w := range load.Writes {
		info.Writes += len(w.Writes)
	}
	for _, r := range load.Runs {
		info.Events += len(r.Events)
	}
	return info, nil
}

// readBundle reads a bundle of at most limit bytes (0:
// DefaultMaxBundle) and checks it whole.
func readBundle(r io.Reader, limit int64) ([]byte, *bundlePlan, error) {
	if limit <= 0 {
		limit = DefaultMaxBundle
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the bundle: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, nil, bundleError("larger than %d bytes", limit)
	}
	p, err := parseBundle(b)
	if err != nil {
		return nil, nil, err
	}
	return b, p, nil
}

// buildLoad builds the thread's record, rows, writes and runs as the
// store keeps them: encoded, sealed for the new thread when the store is
// encrypted, each row's snapshot bookkeeping its own.
func (e *Engine) buildLoad(ctx context.Context, p *bundlePlan, key, tenant, id string) (driver.ThreadLoad, error) {
	rec := driver.ThreadRecord{ID: key, Tenant: tenant, CreatedAt: p.thread.CreatedAt, Metadata: p.thread.Metadata, Status: ThreadIdle}
	if len(rec.Metadata) == 0 {
		rec.Metadata = nil
	}
	rec.Sum = driver.ThreadChecksum(&rec)
	runs, names, err := e.importedRuns(ctx, p, key, tenant, id)
	if err != nil {
		return driver.ThreadLoad{}, err
	}
	load := driver.ThreadLoad{Thread: rec, Rows: make([]driver.Row, 0, len(p.cps)), Runs: runs}
	type info struct{ base, since, size int64 }
	infos := map[bundleRef]info{}
	var scratch []byte
	for i := range p.cps {
		bc := &p.cps[i]
		row := driver.Row{
			Thread: key, Namespace: bc.Namespace, Seq: bc.Seq, Parent: bc.Parent,
			Status: Status(bc.Status), CreatedAt: bc.CreatedAt, Meta: renameRun(bc.Meta, names),
			Patch: encodeBlob(bc.Patch, e.comp, &scratch), ExternalID: bc.ExternalID,
		}
		if len(row.Meta) == 0 {
			row.Meta = nil
		}
		if i == p.root {
			st, _ := driver.RowThreadStatus(&row)
			row.Head = &driver.HeadUpdate{Status: st}
		}
		b := binding{kind: sealPatch, tenant: tenant, thread: key, ns: row.Namespace, seq: row.Seq}
		added := e.sealImported(&b, &row)
		if bc.Snapshot != nil {
			row.Snapshot = encodeBlob(bc.Snapshot, e.comp, &scratch)
			if e.crypt.ring != nil {
				b.kind = sealSnapshot
				row.Snapshot = e.crypt.ring.seal(&b, row.Snapshot)
			}
			row.HasSnapshot, row.Base, row.Since, row.BaseSize = true, row.Seq, 0, int64(len(row.Snapshot))
		} else {
			pi := infos[bundleRef{row.Namespace, row.Parent}]
			row.Base, row.Since, row.BaseSize = pi.base, pi.since+int64(len(row.Patch))-added, pi.size
		}
		infos[bundleRef{row.Namespace, row.Seq}] = info{row.Base, row.Since, row.BaseSize}
		row.Sum = driver.RowChecksum(&row)
		load.Rows = append(load.Rows, row)
		if len(bc.Writes) > 0 {
			load.Writes = append(load.Writes, e.importedWrites(bc, key, tenant))
		}
	}
	return load, nil
}

// sealImported seals a row's metadata and patch (into its patch) when the
// store is encrypted, and returns the bytes sealing added.
func (e *Engine) sealImported(b *binding, row *driver.Row) int64 {
	if e.crypt.ring == nil {
		return 0
	}
	before := len(row.Patch)
	row.Patch, row.Meta = e.crypt.ring.seal(b, joinMeta(row.Meta, row.Patch)), nil
	return int64(len(row.Patch) - before)
}

// importedWrites are a checkpoint's pending writes, sealed when the store
// is encrypted.
func (e *Engine) importedWrites(bc *bundleCheckpoint, key, tenant string) driver.RowWrites {
	rw := driver.RowWrites{Namespace: bc.Namespace, Seq: bc.Seq}
	b := binding{kind: sealWrite, tenant: tenant, thread: key, ns: bc.Namespace, seq: bc.Seq}
	for _, w := range bc.Writes {
		up := w.Update
		if e.crypt.ring != nil {
			b.key = w.Task
			up = e.crypt.ring.seal(&b, up)
		}
		rw.Writes = append(rw.Writes, Write{Task: w.Task, Node: w.Node, Update: up})
	}
	return rw
}

// importedRuns are the bundle's runs as the run log keeps them: ids kept
// unless one is taken or the thread is renamed, data sealed when the
// store is encrypted.
func (e *Engine) importedRuns(ctx context.Context, p *bundlePlan, key, tenant, id string) ([]driver.LoadRun, map[string]string, error) {
	if len(p.runs) == 0 {
		return nil, nil, nil
	}
	rl, ok := e.b.(RunLog)
	if !ok {
		return nil, nil, fmt.Errorf("%w: the bundle holds runs and this store keeps none", ErrInvalidArgument)
	}
	names := map[string]string{}
	if id != p.man.Thread {
		names[p.man.Thread] = id
	}
	taken := len(names) > 0
	for _, r := range p.runs {
		if taken {
			break
		}
		if _, err := rl.Run(ctx, r.ID); err == nil {
			taken = true
		} else if !errors.Is(err, ErrNotFound) {
			return nil, nil, err
		}
	}
	if taken {
		for _, r := range p.runs {
			names[r.ID] = derivedRunID(key, r.ID)
			if _, err := rl.Run(ctx, names[r.ID]); err == nil {
				return nil, nil, fmt.Errorf("%w: run %q exists", ErrConflict, names[r.ID])
			} else if !errors.Is(err, ErrNotFound) {
				return nil, nil, err
			}
		}
	}
	out := make([]driver.LoadRun, 0, len(p.runs))
	for _, r := range p.runs {
		rec := RunRecord{ID: r.ID, Thread: key, Tenant: tenant, Status: r.Status, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Data: renameStrings(r.Data, names)}
		if n, ok := names[r.ID]; ok {
			rec.ID = n
		}
		if !RunEnded(rec.Status) {
			// It runs where the bundle was made, not here: a server of
			// this store must not resume it too.
			rec.Status = "interrupted"
		}
		evs := make([]EventRecord, len(r.Events))
		for i, ev := range r.Events {
			evs[i] = EventRecord{Seq: ev.Seq, Attempt: ev.Attempt, Data: renameStrings(ev.Data, names)}
			if ev.RefSeq != 0 {
				evs[i].Ref = &EventRef{Namespace: ev.RefNS, Seq: ev.RefSeq}
			}
		}
		rec = e.crypt.ring.sealRun(rec)
		lr := driver.LoadRun{ID: rec.ID, Status: rec.Status, CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, Data: rec.Data}
		for _, ev := range e.crypt.ring.sealEvents(rec.ID, frameEvents(evs)) {
			lr.Events = append(lr.Events, driver.LoadEvent{Seq: ev.Seq, Data: ev.Data})
		}
		out = append(out, lr)
	}
	return out, names, nil
}

// renameRun is a checkpoint's stored metadata with its run id renamed
// (names, the runs' new ids).
func renameRun(meta []byte, names map[string]string) []byte {
	if len(names) == 0 || !bytes.Contains(meta, []byte(`"run_id"`)) {
		return meta
	}
	var rec metaRecord
	if json.Unmarshal(meta, &rec) != nil {
		return meta
	}
	n, ok := names[rec.RunID]
	if !ok {
		return meta
	}
	rec.RunID = n
	out, err := encodeMeta(rec.Nodes, rec.Meta)
	if err != nil {
		return meta
	}
	return out
}

// derivedRunID is the id of run old of a bundle imported as thread key: a
// UUID (version 8) made from both.
func derivedRunID(key, old string) string {
	h := sha256.Sum256([]byte("cairn bundle run\x00" + key + "\x00" + old))
	h[6] = h[6]&0x0f | 0x80
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// renameStrings returns JSON data with every string value equal to a key
// of names replaced by its value (data itself when nothing changes, or
// when it is not JSON).
func renameStrings(data []byte, names map[string]string) []byte {
	if len(names) == 0 || !json.Valid(data) {
		return data
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return data
	}
	v, changed := renameIn(v, names)
	if !changed {
		return data
	}
	out, err := marshalPlain(v)
	if err != nil {
		return data
	}
	return out
}

func renameIn(v any, names map[string]string) (any, bool) {
	switch x := v.(type) {
	case string:
		if n, ok := names[x]; ok {
			return n, true
		}
	case []any:
		changed := false
		for i := range x {
			var c bool
			x[i], c = renameIn(x[i], names)
			changed = changed || c
		}
		return x, changed
	case map[string]any:
		changed := false
		for k := range x {
			var c bool
			x[k], c = renameIn(x[k], names)
			changed = changed || c
		}
		return x, changed
	}
	return v, false
}
