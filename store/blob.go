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

// encodeBlob wraps payload for storage.
func encodeBlob(payload []byte, compress bool) []byte {
	sum := crc32.Checksum(payload, castagnoli)
	if compress && len(payload) >= minCompress {
		out := make([]byte, blobHeader, blobHeader+s2.MaxEncodedLen(len(payload)))
		out = append(out, s2.Encode(out[blobHeader:cap(out)], payload)...)
		if n := len(out) - blobHeader; n < len(payload) {
			out[0] = codecS2
			binary.LittleEndian.PutUint32(out[1:], sum)
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
