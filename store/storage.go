package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store/driver"
)

// Where a thread's bytes go. ThreadStorageOf reports, for one thread, the
// rows the store keeps and the bytes of their stored data — the blobs as
// Cairn writes them, after compression and, in an encrypted store, sealing;
// not the database's own page, index or TOAST overhead — by kind, by
// namespace and by top-level state field (channel).

// StoredRows counts stored rows (Count) and the bytes of their stored
// data (Bytes).
type StoredRows = driver.StoredRows

// CheckpointUsage is what a thread's checkpoint rows store: their patches
// and metadata (Bytes is the two together) and the snapshots of the rows
// that have one.
type CheckpointUsage struct {
	Count int64 `json:"count"`
	Bytes int64 `json:"bytes"`
	// PatchBytes are the stored patches. In an encrypted store a row's
	// metadata is sealed inside its patch column: its plaintext length is
	// counted as metadata, the rest of the column (the patch, the seal's
	// header and tag) as patch.
	PatchBytes    int64 `json:"patch_bytes"`
	MetadataBytes int64 `json:"metadata_bytes"`
	Snapshots     int64 `json:"snapshots"`
	SnapshotBytes int64 `json:"snapshot_bytes"`
}

// ChannelUsage is the share of the stored patch and snapshot bytes that one
// top-level state field (a channel) accounts for. A row's stored patch is
// shared among the fields its operations change (an operation counts for
// the field its path's first token names), in proportion to the encoded
// size of each field's operations; a snapshot among the fields of the state
// it holds, in proportion to the encoded size of each.
type ChannelUsage struct {
	Bytes         int64 `json:"bytes"`
	SnapshotBytes int64 `json:"snapshot_bytes"`
}

// NamespaceStorage is what one namespace of a thread stores (the root
// namespace is "").
type NamespaceStorage struct {
	Namespace   string          `json:"checkpoint_ns"`
	Checkpoints CheckpointUsage `json:"checkpoints"`
	// Channels share out the checkpoints' patch and snapshot bytes by
	// field; Unattributed holds what no field claims (a checkpoint that
	// changed nothing, an operation on the whole state, a snapshot of an
	// empty state). The channels and Unattributed add up to the
	// checkpoints' PatchBytes and SnapshotBytes.
	Channels      map[string]ChannelUsage `json:"channels"`
	Unattributed  ChannelUsage            `json:"unattributed"`
	PendingWrites StoredRows              `json:"pending_writes"`
}

// ThreadStorage is where a thread's stored bytes go: its checkpoints (by
// channel and by namespace), its pending writes, and the runs and run
// event logs an HTTP server keeps for it. The totals sum the namespaces;
// TotalBytes is Checkpoints.Bytes + Checkpoints.SnapshotBytes +
// PendingWrites.Bytes + Runs.Bytes + RunEvents.Bytes.
type ThreadStorage struct {
	ThreadID      string                  `json:"thread_id"`
	TotalBytes    int64                   `json:"total_bytes"`
	Checkpoints   CheckpointUsage         `json:"checkpoints"`
	Channels      map[string]ChannelUsage `json:"channels"`
	Unattributed  ChannelUsage            `json:"unattributed"`
	PendingWrites StoredRows              `json:"pending_writes"`
	Runs          StoredRows              `json:"runs"`
	RunEvents     StoredRows              `json:"run_events"`
	// Namespaces lists the thread's namespaces by name, the root first.
	Namespaces []NamespaceStorage `json:"namespaces"`
}

// StorageReporter is a Store that reports where a thread's bytes go.
type StorageReporter interface {
	ThreadStorage(ctx context.Context, thread string) (ThreadStorage, error)
}

// ThreadStorageOf reports where a thread's stored bytes go. It reads every
// checkpoint row of the thread (a page at a time, and each snapshot on its
// own), so it costs what the thread stores; it materialises no state.
// ErrNotFound for a missing thread; errors.ErrUnsupported for a store that
// cannot measure.
func ThreadStorageOf(ctx context.Context, s Store, thread string) (ThreadStorage, error) {
	if r, ok := s.(StorageReporter); ok {
		return r.ThreadStorage(ctx, thread)
	}
	return ThreadStorage{}, fmt.Errorf("%w: %T does not report threads' storage", errors.ErrUnsupported, s)
}

// storagePage is how many checkpoint rows ThreadStorage reads at a time.
const storagePage = 256

// ThreadStorage implements StorageReporter.
func (e *Engine) ThreadStorage(ctx context.Context, thread string) (ThreadStorage, error) {
	if err := e.check(thread, ""); err != nil {
		return ThreadStorage{}, err
	}
	sb, ok := e.b.(driver.StorageBackend)
	if !ok {
		return ThreadStorage{}, fmt.Errorf("%w: backend %T does not measure threads' storage", errors.ErrUnsupported, e.b)
	}
	if _, err := e.b.Thread(ctx, thread); err != nil {
		return ThreadStorage{}, err
	}
	usage, err := sb.ThreadUsage(ctx, thread)
	if err != nil {
		return ThreadStorage{}, err
	}
	nss, err := e.b.Namespaces(ctx, thread)
	if err != nil {
		return ThreadStorage{}, err
	}
	names := make([]string, 0, len(nss)+len(usage.PendingWrites))
	for _, ns := range nss {
		names = append(names, ns.Name)
	}
	for ns := range usage.PendingWrites {
		names = append(names, ns)
	}
	slices.Sort(names)
	out := ThreadStorage{ThreadID: thread, Channels: map[string]ChannelUsage{}, Runs: usage.Runs, RunEvents: usage.RunEvents, Namespaces: []NamespaceStorage{}}
	for _, name := range slices.Compact(names) {
		m, err := e.measureNamespace(ctx, thread, name)
		if err != nil {
			return ThreadStorage{}, err
		}
		m.PendingWrites = usage.PendingWrites[name]
		out.add(&m)
		out.Namespaces = append(out.Namespaces, m)
	}
	c := out.Checkpoints
	out.TotalBytes = c.Bytes + c.SnapshotBytes + out.PendingWrites.Bytes + out.Runs.Bytes + out.RunEvents.Bytes
	return out, nil
}

// add sums a namespace into the thread's totals.
func (t *ThreadStorage) add(m *NamespaceStorage) {
	c, n := &t.Checkpoints, m.Checkpoints
	c.Count += n.Count
	c.Bytes += n.Bytes
	c.PatchBytes += n.PatchBytes
	c.MetadataBytes += n.MetadataBytes
	c.Snapshots += n.Snapshots
	c.SnapshotBytes += n.SnapshotBytes
	for f, u := range m.Channels {
		t.Channels[f] = u.plus(t.Channels[f])
	}
	t.Unattributed = t.Unattributed.plus(m.Unattributed)
	t.PendingWrites.Count += m.PendingWrites.Count
	t.PendingWrites.Bytes += m.PendingWrites.Bytes
}

func (u ChannelUsage) plus(o ChannelUsage) ChannelUsage {
	return ChannelUsage{Bytes: u.Bytes + o.Bytes, SnapshotBytes: u.SnapshotBytes + o.SnapshotBytes}
}

// fieldPart is the encoded bytes of one field's part of a patch or
// snapshot.
type fieldPart struct {
	field string
	n     int64
}

// nsMeter measures one namespace.
type nsMeter struct {
	thread string
	m      NamespaceStorage
	parts  []fieldPart // scratch
}

// measureNamespace reads a namespace's rows, a page at a time, and each
// snapshot on its own.
func (e *Engine) measureNamespace(ctx context.Context, thread, ns string) (NamespaceStorage, error) {
	mt := nsMeter{thread: thread, m: NamespaceStorage{Namespace: ns, Channels: map[string]ChannelUsage{}}}
	stored := make([]int64, 0, storagePage)
	for from := int64(1); ; {
		rows, err := e.b.Rows(ctx, driver.RowQuery{Thread: thread, Namespace: ns, From: from, Limit: storagePage})
		if err != nil {
			return NamespaceStorage{}, err
		}
		stored = stored[:0]
		for i := range rows {
			stored = append(stored, int64(len(rows[i].Meta)+len(rows[i].Patch)))
		}
		if err := e.openChecked(ctx, rows); err != nil {
			return NamespaceStorage{}, err
		}
		for i := range rows {
			if err := mt.row(&rows[i], stored[i]); err != nil {
				return NamespaceStorage{}, err
			}
			if rows[i].HasSnapshot {
				if err := e.measureSnapshot(ctx, &mt, rows[i].Seq); err != nil {
					return NamespaceStorage{}, err
				}
			}
		}
		if len(rows) < storagePage {
			return mt.m, nil
		}
		from = rows[len(rows)-1].Seq + 1
	}
}

// openChecked checks rows read raw against their checksums and opens their
// sealed blobs, as every read does.
func (e *Engine) openChecked(ctx context.Context, rows []driver.Row) error {
	for i := range rows {
		if err := verifyRow(&rows[i]); err != nil {
			return e.diagnose(ctx, &rows[i], err)
		}
	}
	return e.openRows(ctx, rows)
}

// row counts an opened row whose meta and patch columns stored bytes, and
// shares its patch bytes out among the fields its operations change.
func (mt *nsMeter) row(r *driver.Row, stored int64) error {
	c := &mt.m.Checkpoints
	meta := int64(len(r.Meta))
	c.Count++
	c.Bytes += stored
	c.MetadataBytes += meta
	c.PatchBytes += stored - meta
	payload, err := decodeBlob(r.Patch)
	if err == nil {
		mt.parts = mt.parts[:0]
		err = state.PatchFieldBytes(payload, mt.part)
	}
	if err != nil {
		return &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "patch", Err: err}
	}
	mt.share(stored-meta, false)
	return nil
}

// measureSnapshot counts the snapshot of row seq and shares its bytes out
// among the fields of the state it holds. A row pruned since its page was
// read is skipped.
func (e *Engine) measureSnapshot(ctx context.Context, mt *nsMeter, seq int64) error {
	rows, err := e.b.Rows(ctx, driver.RowQuery{Thread: mt.thread, Namespace: mt.m.Namespace, From: seq, To: seq, Snapshots: true})
	if err != nil || len(rows) == 0 {
		return err
	}
	r := &rows[0]
	if r.Snapshot == nil {
		return &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "snapshot", Err: errors.New("missing")}
	}
	stored := int64(len(r.Snapshot))
	if err := e.openChecked(ctx, rows); err != nil {
		return err
	}
	payload, err := decodeBlob(r.Snapshot)
	if err == nil {
		mt.parts = mt.parts[:0]
		err = state.DocFieldBytes(payload, mt.part)
	}
	if err != nil {
		return &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "snapshot", Err: err}
	}
	mt.m.Checkpoints.Snapshots++
	mt.m.Checkpoints.SnapshotBytes += stored
	mt.share(stored, true)
	return nil
}

func (mt *nsMeter) part(field string, n int) {
	mt.parts = append(mt.parts, fieldPart{field: field, n: int64(n)})
}

// share gives stored bytes to the fields of mt.parts in proportion to
// their encoded sizes: each share is the rounded-down running total less
// the shares before it, so the shares add up to stored exactly. With no
// part (or parts of no bytes), all of it is unattributed; a part of field
// "" (the whole state) is too.
func (mt *nsMeter) share(stored int64, snapshot bool) {
	give := func(field string, n int64) {
		u := ChannelUsage{Bytes: n}
		if snapshot {
			u = ChannelUsage{SnapshotBytes: n}
		}
		if field == "" {
			mt.m.Unattributed = mt.m.Unattributed.plus(u)
			return
		}
		mt.m.Channels[field] = mt.m.Channels[field].plus(u)
	}
	var total int64
	for _, p := range mt.parts {
		total += p.n
	}
	if total == 0 {
		give("", stored)
		return
	}
	var cum, done int64
	for _, p := range mt.parts {
		cum += p.n
		upto := stored * cum / total
		give(p.field, upto-done)
		done = upto
	}
}
