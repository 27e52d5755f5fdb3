package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cairn-dev/cairn/store/driver"
)

// rowCrypt is an Engine's encryption at rest: its keyring (nil: blobs are
// stored as they are, and sealed blobs are refused with ErrNoKey) and the
// tenants of threads, which the associated data of checkpoint blobs and
// pending writes names.
type rowCrypt struct {
	ring *Keyring

	mu      sync.Mutex
	tenants map[string]string
}

const maxCachedTenants = 1 << 16

func newRowCrypt(k *Keyring) *rowCrypt {
	return &rowCrypt{ring: k, tenants: map[string]string{}}
}

// tenant returns the tenant of a thread, from the cache or the backend
// (fresh: skip the cache). A thread that does not exist yet has the tenant
// def (the record an insert would create).
func (c *rowCrypt) tenant(ctx context.Context, b driver.Backend, thread, def string, fresh bool) (string, error) {
	c.mu.Lock()
	t, ok := c.tenants[thread]
	c.mu.Unlock()
	if ok && !fresh {
		return t, nil
	}
	rec, err := b.Thread(ctx, thread)
	if errors.Is(err, ErrNotFound) {
		return def, nil
	}
	if err != nil {
		return "", err
	}
	if err := verifyThread(&rec); err != nil {
		return "", err
	}
	c.remember(thread, rec.Tenant)
	return rec.Tenant, nil
}

func (c *rowCrypt) remember(thread, tenant string) {
	c.mu.Lock()
	if len(c.tenants) >= maxCachedTenants {
		clear(c.tenants)
	}
	c.tenants[thread] = tenant
	c.mu.Unlock()
}

func (c *rowCrypt) forget(thread string) {
	c.mu.Lock()
	delete(c.tenants, thread)
	c.mu.Unlock()
}

// rowSealer seals the blobs of one row.
type rowSealer struct {
	ring  *Keyring
	b     binding
	added int64 // bytes sealing added to the patch
}

// In an encrypted store a row's metadata travels in its sealed patch
// blob — the patch column holds seal(uvarint(len(meta)) | meta | patch
// blob) and the meta column is empty — so a row costs one seal and one
// header, not two.

// joinMeta is the plaintext of a sealed patch blob.
func joinMeta(meta, patch []byte) []byte {
	out := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(meta)+len(patch)), uint64(len(meta)))
	out = append(out, meta...)
	return append(out, patch...)
}

// splitMeta undoes joinMeta.
func splitMeta(plain []byte) (meta, patch []byte, err error) {
	n, k := binary.Uvarint(plain)
	if k <= 0 || n > uint64(len(plain)-k) {
		return nil, nil, errors.New("sealed patch: bad metadata length")
	}
	if n > 0 {
		meta = plain[k : k+int(n)]
	}
	return meta, plain[k+int(n):], nil
}

// sealer returns the sealer of a row about to be inserted: its Meta and
// Patch are sealed at once (into Patch), its snapshot by sealSnapshot.
// Without a keyring it changes nothing.
func (e *Engine) sealer(ctx context.Context, r *driver.Row) (rowSealer, error) {
	c := e.crypt
	if c.ring == nil {
		return rowSealer{}, nil
	}
	var tenant string
	switch {
	case r.Create != nil && r.NewThread:
		tenant = r.Create.Tenant
		c.remember(r.Thread, tenant)
	default:
		def := ""
		if r.Create != nil {
			def = r.Create.Tenant
		}
		// A first row reads the thread afresh: the thread may have been
		// deleted and made again, for another tenant, since it was cached.
		var err error
		if tenant, err = c.tenant(ctx, e.b, r.Thread, def, r.Seq == 1); err != nil {
			return rowSealer{}, err
		}
	}
	s := rowSealer{ring: c.ring, b: binding{kind: sealPatch, tenant: tenant, thread: r.Thread, ns: r.Namespace, seq: r.Seq}}
	before := len(r.Patch)
	r.Patch, r.Meta = c.ring.seal(&s.b, joinMeta(r.Meta, r.Patch)), nil
	s.added = int64(len(r.Patch) - before)
	return s, nil
}

// overhead is what sealing added to the row's patch (the header and the
// metadata): the snapshot policy counts patch bytes as an unencrypted
// store would, so encryption does not make snapshots more frequent.
func (s rowSealer) overhead() int64 { return s.added }

// sealSnapshot seals a row's snapshot blob.
func (s rowSealer) sealSnapshot(blob []byte) []byte {
	if s.ring == nil {
		return blob
	}
	s.b.kind = sealSnapshot
	return s.ring.seal(&s.b, blob)
}

// openRows checks the snapshot sizes of rows just read and checked
// against their checksums, and opens their sealed blobs in place: with a
// keyring every blob must be sealed; without one, none may be.
func (e *Engine) openRows(ctx context.Context, rows []driver.Row) error {
	for i := range rows {
		r := &rows[i]
		if r.Snapshot == nil || isSealed(r.Snapshot) && e.crypt.ring == nil {
			continue
		}
		if int64(len(r.Snapshot)) != r.BaseSize {
			return &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "snapshot", Err: fmt.Errorf("%d bytes, the row says %d", len(r.Snapshot), r.BaseSize)}
		}
	}
	if len(rows) == 0 {
		return nil
	}
	c := e.crypt
	b := binding{thread: rows[0].Thread}
	if c.ring != nil {
		var err error
		if b.tenant, err = c.tenant(ctx, e.b, b.thread, "", false); err != nil {
			return err
		}
	}
	for i := range rows {
		if err := e.openRow(ctx, &b, &rows[i]); err != nil {
			return err
		}
	}
	return nil
}

// openRow opens the blobs of one row. When a blob fails authentication
// under a cached tenant, the tenant is read again once (the thread may
// have been deleted and made again by another process).
func (e *Engine) openRow(ctx context.Context, b *binding, r *driver.Row) error {
	b.ns, b.seq = r.Namespace, r.Seq
	if len(r.Meta) > 0 && e.crypt.ring != nil {
		return &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "metadata", Err: errPlaintext}
	}
	fields := [...]struct {
		kind sealKind
		what string
		blob *[]byte
	}{{sealPatch, "patch", &r.Patch}, {sealSnapshot, "snapshot", &r.Snapshot}}
	for _, f := range fields {
		if len(*f.blob) == 0 {
			continue
		}
		b.kind = f.kind
		plain, err := e.crypt.ring.openBlob(b, *f.blob)
		if errors.Is(err, errSealAuth) {
			if t, terr := e.crypt.tenant(ctx, e.b, b.thread, "", true); terr == nil && t != b.tenant {
				b.tenant = t
				plain, err = e.crypt.ring.openBlob(b, *f.blob)
			}
		}
		if errors.Is(err, ErrNoKey) && e.crypt.ring == nil {
			return fmt.Errorf("thread %q namespace %q seq %d, %s: %w", r.Thread, r.Namespace, r.Seq, f.what, err)
		}
		if err == nil && f.kind == sealPatch && e.crypt.ring != nil {
			r.Meta, plain, err = splitMeta(plain)
		}
		if err != nil {
			return &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: f.what, Err: err}
		}
		*f.blob = plain
	}
	return nil
}

// writeBinding is the associated data of a pending write.
func (e *Engine) writeBinding(ctx context.Context, thread, ns string, seq int64) (binding, error) {
	b := binding{kind: sealWrite, thread: thread, ns: ns, seq: seq}
	if e.crypt.ring == nil {
		return b, nil
	}
	var err error
	b.tenant, err = e.crypt.tenant(ctx, e.b, thread, "", false)
	return b, err
}

// sealWrites returns ws with their updates sealed (a copy).
func (e *Engine) sealWrites(ctx context.Context, thread, ns string, seq int64, ws []Write) ([]Write, error) {
	if e.crypt.ring == nil {
		return ws, nil
	}
	b, err := e.writeBinding(ctx, thread, ns, seq)
	if err != nil {
		return nil, err
	}
	out := make([]Write, len(ws))
	for i, w := range ws {
		b.key = w.Task
		w.Update = e.crypt.ring.seal(&b, w.Update)
		out[i] = w
	}
	return out, nil
}

// openWrites opens the updates of pending writes read from the backend.
func (e *Engine) openWrites(ctx context.Context, thread, ns string, seq int64, ws []Write) ([]Write, error) {
	if len(ws) == 0 {
		return ws, nil
	}
	b, err := e.writeBinding(ctx, thread, ns, seq)
	if err != nil {
		return nil, err
	}
	for i := range ws {
		b.key = ws[i].Task
		plain, err := e.crypt.ring.openBlob(&b, ws[i].Update)
		if errors.Is(err, ErrNoKey) && e.crypt.ring == nil {
			return nil, fmt.Errorf("thread %q namespace %q seq %d, pending write %q: %w", thread, ns, seq, ws[i].Task, err)
		}
		if err != nil {
			return nil, &CorruptError{Thread: thread, Namespace: ns, Seq: seq, What: fmt.Sprintf("pending write %q", ws[i].Task), Err: err}
		}
		ws[i].Update = plain
	}
	return ws, nil
}

// rebindRow seals the blobs of a row read raw from thread from (r.Thread
// already names the thread it is copied to) for its new place: a copy of
// a thread is sealed for the copy. Without a keyring, it refuses sealed
// blobs.
func (e *Engine) rebindRow(ctx context.Context, r *driver.Row, from string) error {
	src := []driver.Row{*r}
	src[0].Thread = from
	if err := e.openRows(ctx, src); err != nil {
		return err
	}
	if e.crypt.ring == nil {
		return nil
	}
	opened := src[0]
	opened.Thread = r.Thread
	s, err := e.sealer(ctx, &opened)
	if err != nil {
		return err
	}
	if opened.Snapshot != nil {
		opened.Snapshot = s.sealSnapshot(opened.Snapshot)
	}
	*r = opened
	return nil
}

// rebindWrites seals pending writes read raw from thread from for thread
// to, as rebindRow does rows.
func (e *Engine) rebindWrites(ctx context.Context, from, to, ns string, seq int64, ws []Write) ([]Write, error) {
	ws, err := e.openWrites(ctx, from, ns, seq, ws)
	if err != nil {
		return nil, err
	}
	return e.sealWrites(ctx, to, ns, seq, ws)
}

// diagnose refines the checksum mismatch verifyRow found in a row of an
// encrypted store: verifyRow cannot check a sealed patch, so it is opened
// here, and named when it is the damaged column.
func (e *Engine) diagnose(ctx context.Context, r *driver.Row, err error) error {
	var ce *CorruptError
	if e.crypt.ring == nil || !isSealed(r.Patch) || !errors.As(err, &ce) || ce.What != "row" {
		return err
	}
	tenant, terr := e.crypt.tenant(ctx, e.b, r.Thread, "", false)
	if terr != nil {
		return err
	}
	b := binding{kind: sealPatch, tenant: tenant, thread: r.Thread, ns: r.Namespace, seq: r.Seq}
	if _, oerr := e.crypt.ring.open(&b, r.Patch); oerr != nil {
		ce.What, ce.Err = "patch", fmt.Errorf("%w: %v", errRowSum, oerr)
	}
	return err
}
