package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/klauspost/compress/s2"
)

// A stored blob is one codec byte, the CRC-32C of the decoded payload
// (little endian), then the payload, raw or S2-compressed.
const (
	codecRaw = 0
	codecS2  = 1

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
	default:
		return nil, fmt.Errorf("unknown blob codec %d", b[0])
	}
	if crc32.Checksum(payload, castagnoli) != sum {
		return nil, errChecksum
	}
	return payload, nil
}
