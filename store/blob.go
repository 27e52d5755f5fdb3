package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/klauspost/compress/s2"
)

// A stored blob is one codec byte, the CRC-32C of the decoded payload
// (little endian), then the payload: raw, S2-compressed in one block, or
// (codecS2Chunks, large snapshots) the payload's length as 8 bytes little
// endian and S2 blocks of at most blobChunk bytes each, every block
// preceded by its compressed length (uvarint).
const (
	codecRaw = 0
	codecS2  = 1
	// 2 is codecSealed: an encrypted blob (crypt.go).
	codecS2Chunks = 3

	blobChunk = 1 << 20

	blobHeader  = 5
	minCompress = 64
	// maxDecoded bounds what a damaged length field can make us allocate.
	maxDecoded = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeBlob wraps payload for storage. scratch, when given, is a buffer
// the compressor may use; the result never aliases it.
func encodeBlob(payload []byte, compress bool, scratch *[]byte) []byte {
	sum := crc32.Checksum(payload, castagnoli)
	if compress && len(payload) >= minCompress {
		var buf []byte
		if scratch != nil {
			buf = *scratch
		}
		if need := s2.MaxEncodedLen(len(payload)); cap(buf) < need {
			buf = make([]byte, need)
		}
		enc := s2.Encode(buf[:cap(buf)], payload)
		if scratch != nil {
			*scratch = buf
		}
		if len(enc) < len(payload) {
			out := make([]byte, blobHeader+len(enc))
			out[0] = codecS2
			binary.LittleEndian.PutUint32(out[1:], sum)
			copy(out[blobHeader:], enc)
			return out
		}
	}
	out := make([]byte, blobHeader, blobHeader+len(payload))
	out[0] = codecRaw
	binary.LittleEndian.PutUint32(out[1:], sum)
	return append(out, payload...)
}

var errChecksum = errors.New("checksum mismatch")

// decodeBlob checks and unwraps a stored blob.
func decodeBlob(b []byte) ([]byte, error) {
	if len(b) < blobHeader {
		return nil, fmt.Errorf("blob of %d bytes is shorter than its header", len(b))
	}
	sum := binary.LittleEndian.Uint32(b[1:])
	var payload []byte
	switch b[0] {
	case codecRaw:
		payload = b[blobHeader:]
	case codecS2:
		n, err := s2.DecodedLen(b[blobHeader:])
		if err != nil {
			return nil, fmt.Errorf("compressed blob: %v", err)
		}
		if n > maxDecoded {
			return nil, fmt.Errorf("compressed blob claims %d bytes", n)
		}
		if payload, err = s2.Decode(make([]byte, n), b[blobHeader:]); err != nil {
			return nil, fmt.Errorf("compressed blob: %v", err)
		}
	case codecS2Chunks:
		var err error
		if payload, err = decodeChunks(b[blobHeader:]); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown blob codec %d", b[0])
	}
	if crc32.Checksum(payload, castagnoli) != sum {
		return nil, errChecksum
	}
	return payload, nil
}

// decodeChunks decodes the body of a codecS2Chunks blob into one buffer.
func decodeChunks(src []byte) ([]byte, error) {
	if len(src) < 8 {
		return nil, fmt.Errorf("chunked blob of %d bytes has no length", len(src))
	}
	n := binary.LittleEndian.Uint64(src)
	if n > maxDecoded {
		return nil, fmt.Errorf("chunked blob claims %d bytes", n)
	}
	payload := make([]byte, n)
	off := 0
	for src = src[8:]; len(src) > 0; {
		clen, k := binary.Uvarint(src)
		if k <= 0 || clen > uint64(len(src)-k) {
			return nil, fmt.Errorf("chunked blob: bad block length at payload byte %d", off)
		}
		blk := src[k : k+int(clen)]
		src = src[k+int(clen):]
		dn, err := s2.DecodedLen(blk)
		if err != nil || dn > len(payload)-off {
			return nil, fmt.Errorf("chunked blob: block at payload byte %d: %d bytes, %v", off, dn, err)
		}
		if _, err := s2.Decode(payload[off:off+dn], blk); err != nil {
			return nil, fmt.Errorf("chunked blob: block at payload byte %d: %v", off, err)
		}
		off += dn
	}
	if off != len(payload) {
		return nil, fmt.Errorf("chunked blob holds %d of its %d bytes", off, len(payload))
	}
	return payload, nil
}

// blobWriter makes a stored blob of a payload written to it a piece at a
// time (a large snapshot, never whole in memory before it is stored):
// compressed, in blocks (codecS2Chunks), or raw.
type blobWriter struct {
	compress bool
	out      []byte // the blob so far; its header is filled by finish
	raw      []byte // the payload's bytes not yet compressed
	comp     []byte // one block's compressed bytes
	crc      uint32
	n        int64
}

// newBlobWriter returns a blobWriter; raw and comp are buffers it may reuse
// for its blocks (the caller keeps them back from its raw and comp fields
// after finish).
func newBlobWriter(compress bool, raw, comp []byte) *blobWriter {
	bw := &blobWriter{compress: compress, out: make([]byte, blobHeader, 64<<10)}
	if compress {
		bw.out = append(bw.out, make([]byte, 8)...)
		if bw.raw = raw[:0]; cap(raw) < blobChunk {
			bw.raw = make([]byte, 0, blobChunk)
		}
		if bw.comp = comp; len(comp) < s2.MaxEncodedLen(blobChunk) {
			bw.comp = make([]byte, s2.MaxEncodedLen(blobChunk))
		}
	}
	return bw
}

// Write implements io.Writer.
func (bw *blobWriter) Write(p []byte) (int, error) {
	bw.crc = crc32.Update(bw.crc, castagnoli, p)
	bw.n += int64(len(p))
	if !bw.compress {
		bw.out = append(bw.out, p...)
		return len(p), nil
	}
	k := len(p)
	for len(p) > 0 {
		take := min(len(p), blobChunk-len(bw.raw))
		bw.raw, p = append(bw.raw, p[:take]...), p[take:]
		if len(bw.raw) == blobChunk {
			bw.block()
		}
	}
	return k, nil
}

// block compresses the pending bytes into one block.
func (bw *blobWriter) block() {
	enc := s2.Encode(bw.comp, bw.raw)
	bw.out = binary.AppendUvarint(bw.out, uint64(len(enc)))
	bw.out = append(bw.out, enc...)
	bw.raw = bw.raw[:0]
}

// finish returns the blob.
func (bw *blobWriter) finish() []byte {
	bw.out[0] = codecRaw
	if bw.compress {
		if len(bw.raw) > 0 {
			bw.block()
		}
		bw.out[0] = codecS2Chunks
		binary.LittleEndian.PutUint64(bw.out[blobHeader:], uint64(bw.n))
	}
	binary.LittleEndian.PutUint32(bw.out[1:], bw.crc)
	return bw.out
}
