package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store/driver"
)

// exportBundle implements ExportBundle.
func (e *Engine) exportBundle(ctx context.Context, thread string, w io.Writer) (BundleInfo, error) {
	if err := e.check(thread, ""); err != nil {
		return BundleInfo{}, err
	}
	rec, err := e.b.Thread(ctx, thread)
	if err != nil {
		return BundleInfo{}, err
	}
	if err := verifyThread(&rec); err != nil {
		return BundleInfo{}, err
	}
	nss, err := e.b.Namespaces(ctx, thread)
	if err != nil {
		return BundleInfo{}, err
	}
	_, id := SplitThreadKey(thread)
	info := BundleInfo{Thread: thread, Source: id, Namespaces: len(nss)}
	man := bundleManifest{Format: BundleFormat, Cairn: cairnVersion(), Thread: id, ExportedAt: e.now().UnixNano(), Namespaces: []string{}}
	for _, ns := range nss {
		man.Namespaces = append(man.Namespaces, ns.Name)
	}
	bw, err := newBundleWriter(w)
	if err != nil {
		return BundleInfo{}, err
	}
	if err := bw.section(secManifest, man); err != nil {
		return BundleInfo{}, err
	}
	if err := bw.section(secThread, bundleThread{CreatedAt: rec.CreatedAt, Metadata: rec.Metadata}); err != nil {
		return BundleInfo{}, err
	}
	for _, ns := range nss {
		if err := e.exportNamespace(ctx, bw, thread, ns.Name, &info); err != nil {
			return BundleInfo{}, err
		}
	}
	if err := e.exportRuns(ctx, bw, thread, &info); err != nil {
		return BundleInfo{}, err
	}
	if err := bw.end(); err != nil {
		return BundleInfo{}, err
	}
	info.Bytes = bw.n
	return info, nil
}

// exportNamespace writes a namespace's checkpoints, in seq order, each
// with its state's digest, replaying its patches from its snapshots.
func (e *Engine) exportNamespace(ctx context.Context, bw *bundleWriter, thread, ns string, info *BundleInfo) error {
	rows, err := e.rows(ctx, driver.RowQuery{Thread: thread, Namespace: ns, Snapshots: true})
	if err != nil {
		return err
	}
	states := make(map[int64]state.Doc, len(rows))
	parents := make(map[int64]bool, len(rows))
	for i := range rows {
		parents[rows[i].Parent] = true
	}
	for i := range rows {
		r := &rows[i]
		bc, d, err := exportRow(r, states)
		if err != nil {
			return err
		}
		states[r.Seq] = d
		if !parents[r.Seq] {
			// The end of a branch: its state's digest pins every patch
			// on the way to it.
			bc.State = stateDigest(d)
		}
		ws, err := e.b.Writes(ctx, thread, ns, r.Seq)
		if err == nil {
			ws, err = e.openWrites(ctx, thread, ns, r.Seq, ws)
		}
		if err != nil {
			return err
		}
		for _, w := range ws {
			bc.Writes = append(bc.Writes, bundleWrite{Task: w.Task, Node: w.Node, Update: w.Update})
		}
		bc.Sum = rowDigest(&bc)
		if err := bw.section(secCheckpoint, bc); err != nil {
			return err
		}
		info.Checkpoints++
		info.Writes += len(ws)
	}
	return nil
}

// exportRow is the bundle's form of an opened row and its state, computed
// from its parent's in states (or its snapshot, for a first row).
func exportRow(r *driver.Row, states map[int64]state.Doc) (bundleCheckpoint, state.Doc, error) {
	bc := bundleCheckpoint{
		Namespace: r.Namespace, Seq: r.Seq, Parent: r.Parent, Status: int(r.Status),
		CreatedAt: r.CreatedAt, Meta: r.Meta, ExternalID: r.ExternalID,
	}
	patch, err := decodeBlob(r.Patch)
	if err != nil {
		return bc, state.Doc{}, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "patch", Err: err}
	}
	bc.Patch = patch
	var d state.Doc
	parent, ok := states[r.Parent]
	switch {
	case r.HasSnapshot && r.Snapshot != nil:
		if bc.Snapshot, err = decodeBlob(r.Snapshot); err != nil {
			return bc, state.Doc{}, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "snapshot", Err: err}
		}
		if d, err = decodeSnapshot(r); err != nil {
			return bc, state.Doc{}, err
		}
	case !ok:
		// A first checkpoint, or one whose parent was pruned, has a
		// snapshot of its own.
		return bc, state.Doc{}, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "snapshot", Err: errors.New("a checkpoint without its parent or its snapshot")}
	default:
		p, err := decodePatch(r)
		if err != nil {
			return bc, state.Doc{}, err
		}
		if d, err = parent.Apply(p); err != nil {
			return bc, state.Doc{}, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "patch", Err: err}
		}
	}
	return bc, d, nil
}

// rowDigest is the SHA-256 (hex) of a checkpoint's fields as the bundle
// holds them, its pending writes included, each length-prefixed.
func rowDigest(bc *bundleCheckpoint) string {
	b := appendString(nil, bc.Namespace)
	for _, n := range []int64{bc.Seq, bc.Parent, int64(bc.Status), bc.CreatedAt} {
		b = binary.AppendVarint(b, n)
	}
	for _, f := range [][]byte{bc.Meta, bc.Patch, bc.Snapshot, []byte(bc.State), []byte(bc.ExternalID)} {
		b = appendString(b, string(f))
	}
	for _, w := range bc.Writes {
		b = appendString(appendString(appendString(b, w.Task), w.Node), string(w.Update))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// stateDigest is the SHA-256 (hex) of a state's JSON.
func stateDigest(d state.Doc) string {
	sum := sha256.Sum256(d.AppendJSON(nil))
	return hex.EncodeToString(sum[:])
}

// exportRuns writes the thread's runs, oldest first, with their events.
func (e *Engine) exportRuns(ctx context.Context, bw *bundleWriter, thread string, info *BundleInfo) error {
	rl, err := RunLogOf(e)
	if errors.Is(err, ErrInvalidArgument) {
		return nil // a backend that keeps no runs
	}
	if err != nil {
		return err
	}
	runs, err := rl.Runs(ctx, RunQuery{Thread: thread})
	if err != nil {
		return err
	}
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		evs, err := rl.Events(ctx, r.ID, 0, 0)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("events of run %q: %w", r.ID, err)
		}
		br := bundleRun{ID: r.ID, Status: r.Status, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Data: r.Data}
		for _, ev := range evs {
			be := bundleEvent{Seq: ev.Seq, Attempt: ev.Attempt, Data: ev.Data}
			if ev.Ref != nil {
				be.RefNS, be.RefSeq = ev.Ref.Namespace, ev.Ref.Seq
			}
			br.Events = append(br.Events, be)
		}
		if err := bw.section(secRun, br); err != nil {
			return err
		}
		info.Runs++
		info.Events += len(evs)
	}
	return nil
}
