package driver

import (
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
)

// Row and thread checksums: a CRC-32C over a length-prefixed encoding of
// every stored field as stored (ciphertext in an encrypted store), so
// that an edited column (a parent, a status, a seq,
// the metadata that names an agent file) is found on read like a damaged
// blob. They detect damage and casual edits, not an adversary who can
// recompute them: they are not a MAC.
const (
	rowSumTag    = 'r'
	threadSumTag = 't'
)

// RowChecksum returns the checksum of a row: Thread, Namespace, Seq,
// Parent, Base, Since, BaseSize, Status, CreatedAt, HasSnapshot, Meta and
// Patch. Backends need it only to upgrade rows written before checksums.
func RowChecksum(r *Row) uint32 {
	var buf [128]byte
	b := append(buf[:0], rowSumTag)
	b = appendString(b, r.Thread)
	b = appendString(b, r.Namespace)
	for _, v := range [...]int64{r.Seq, r.Parent, r.Base, r.Since, r.BaseSize, int64(r.Status), r.CreatedAt} {
		b = binary.AppendVarint(b, v)
	}
	if r.HasSnapshot {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Meta)))
	sum := crcSmall(0, b)
	sum = crc32.Update(sum, castagnoli, r.Meta)
	b = binary.AppendUvarint(buf[:0], uint64(len(r.Patch)))
	sum = crcSmall(sum, b)
	return crc32.Update(sum, castagnoli, r.Patch)
}

// crcSmall continues a CRC-32C over a few bytes, as crc32.Update does, but
// in plain Go so that a buffer on the stack stays there (crc32.Update lets
// its argument escape): the checksum of a row costs no allocation.
func crcSmall(crc uint32, p []byte) uint32 {
	crc = ^crc
	for _, v := range p {
		crc = castagnoli[byte(crc)^v] ^ (crc >> 8)
	}
	return ^crc
}

// ThreadChecksum returns the checksum of a thread record: ID, Tenant,
// Metadata and CreatedAt. Metadata counts by its JSON value, not its bytes
// (Postgres stores it as jsonb, which reorders keys and reformats numbers).
func ThreadChecksum(t *ThreadRecord) uint32 {
	b := append(make([]byte, 0, 64+len(t.Metadata)), threadSumTag)
	b = appendString(b, t.ID)
	b = appendString(b, t.Tenant)
	b = binary.AppendVarint(b, t.CreatedAt)
	b = appendString(b, string(canonicalJSON(t.Metadata)))
	return crc32.Checksum(b, castagnoli)
}

// MovedRowChecksum is the checksum a row stored with checksum sum under
// thread from takes when it moves, as it is, to r.Thread (format 7 keys
// tenants' threads): the checksum of the moved row when sum was right,
// and one still wrong by as much when it was not, so that a row damaged
// before the move is still found after it. Backends need it only to
// upgrade rows.
func MovedRowChecksum(r *Row, from string, sum uint32) uint32 {
	old := *r
	old.Thread = from
	return sum ^ RowChecksum(&old) ^ RowChecksum(r)
}

// MovedThreadChecksum is MovedRowChecksum for a thread record whose id
// was from.
func MovedThreadChecksum(t *ThreadRecord, from string, sum uint32) uint32 {
	old := *t
	old.ID = from
	return sum ^ ThreadChecksum(&old) ^ ThreadChecksum(t)
}

// canonicalJSON re-encodes a JSON value with sorted keys and numbers as
// float64 write them; bytes that are not JSON are returned as they are (and
// fail the checksum that was computed over a valid value).
func canonicalJSON(raw []byte) []byte {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	b, err := marshalPlain(v)
	if err != nil {
		return raw
	}
	return b
}
