package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store/driver"
)

// encodePatch encodes a checkpoint's patch as a stored blob, through the
// engine's scratch buffers: only the blob itself is allocated.
func (e *Engine) encodePatch(p state.Patch) []byte {
	sb := e.getScratch()
	sb.doc = state.EncodePatch(sb.doc[:0], p)
	out := encodeBlob(sb.doc, e.comp, &sb.comp)
	e.scratch.Put(sb)
	return out
}

// encodeSnapshot encodes a full state as a stored blob. A large state is
// encoded and compressed a block at a time, never held whole in its
// encoded form beside the stored blob.
func (e *Engine) encodeSnapshot(d state.Doc) []byte {
	if state.EncodedDocSize(d) < blobChunk {
		sb := e.getScratch()
		sb.doc = state.EncodeDoc(sb.doc[:0], d)
		out := encodeBlob(sb.doc, e.comp, &sb.comp)
		e.scratch.Put(sb)
		return out
	}
	sb := e.getScratch()
	bw := newBlobWriter(e.comp, sb.raw, sb.chunk)
	_, _ = state.WriteDoc(bw, d) // a blobWriter never fails
	out := bw.finish()
	sb.raw, sb.chunk = bw.raw, bw.comp
	e.scratch.Put(sb)
	return out
}

// metaRecord is the stored form of a checkpoint's metadata.
type metaRecord struct {
	Nodes []string `json:"nodes,omitempty"`
	Meta
}

func encodeMeta(nodes []string, m Meta) ([]byte, error) {
	if b, ok := appendMetaJSON(make([]byte, 0, 128), nodes, &m); ok {
		if len(b) == 2 { // {}
			return nil, nil
		}
		return b, nil
	}
	rec := metaRecord{Nodes: nodes, Meta: m}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("%w: checkpoint metadata: %v", ErrInvalidArgument, err)
	}
	if string(b) == "{}" {
		return nil, nil
	}
	return b, nil
}

// checkpoint decodes a row (its patch when present).
func checkpoint(r *driver.Row) (Checkpoint, error) {
	cp := Checkpoint{
		Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, Parent: r.Parent,
		Status: r.Status, CreatedAt: time.Unix(0, r.CreatedAt), Snapshot: r.HasSnapshot,
		ExternalID: r.ExternalID,
	}
	if !r.Status.Valid() {
		return Checkpoint{}, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "row", Err: fmt.Errorf("status %d", r.Status)}
	}
	if len(r.Meta) > 0 {
		var rec metaRecord
		if err := json.Unmarshal(r.Meta, &rec); err != nil {
			return Checkpoint{}, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "metadata", Err: err}
		}
		cp.Nodes, cp.Meta = rec.Nodes, rec.Meta
	}
	p, err := decodePatch(r)
	if err != nil {
		return Checkpoint{}, err
	}
	cp.Patch = p
	return cp, nil
}

func decodePatch(r *driver.Row) (state.Patch, error) {
	payload, err := decodeBlob(r.Patch)
	if err == nil {
		var p state.Patch
		// The patch bytes are covered by the blob's CRC and by the row's
		// checksum, both checked before this: its JSON values are not
		// validated again (it is the hot path of every load).
		if p, err = state.DecodePatch(payload, false); err == nil {
			return p, nil
		}
	}
	return nil, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "patch", Err: err}
}

// decodeSnapshot decodes a row's snapshot.
func decodeSnapshot(r *driver.Row) (state.Doc, error) {
	if r.Snapshot == nil {
		return state.Doc{}, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "snapshot", Err: errors.New("missing")}
	}
	// Its size was checked against the row's by Engine.openRows.
	payload, err := decodeBlob(r.Snapshot)
	if err == nil {
		var d state.Doc
		// A snapshot is bound to its row only by key and size, so its JSON
		// values are validated: a snapshot with a valid CRC but invalid
		// content is reported here, with its thread and seq.
		if d, err = state.DecodeDoc(payload, true); err == nil {
			return d, nil
		}
	}
	return state.Doc{}, &CorruptError{Thread: r.Thread, Namespace: r.Namespace, Seq: r.Seq, What: "snapshot", Err: err}
}

// marshalPlain encodes v as compact JSON without HTML escaping, the form
// SQL JSON functions produce.
func marshalPlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
