package driver

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unicode"
)

// Terms splits text into the words full-text search matches: runs of
// letters and digits, in lower case; words over 255 bytes are left out.
// Backends index and query these words, so every backend matches alike.
func Terms(text string) []string {
	var out []string
	for w := range strings.FieldsFuncSeq(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) }) {
		if len(w) <= maxTermBytes {
			out = append(out, strings.ToLower(w))
		}
	}
	return out
}

// EncodeVectors encodes an item's vectors for a backend to store: their
// count and length (uint32 each), then every float32, little-endian; nil
// for none.
func EncodeVectors(vs [][]float32) []byte {
	if len(vs) == 0 {
		return nil
	}
	dims := len(vs[0])
	b := make([]byte, 8, 8+4*dims*len(vs))
	binary.LittleEndian.PutUint32(b, uint32(len(vs)))
	binary.LittleEndian.PutUint32(b[4:], uint32(dims))
	for _, v := range vs {
		for _, f := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	return b
}

// DecodeVectors decodes what EncodeVectors made; ErrCorrupt when the
// bytes do not hold what they say.
func DecodeVectors(b []byte) ([][]float32, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < 8 {
		return nil, fmt.Errorf("%w: item vectors: %d bytes", ErrCorrupt, len(b))
	}
	n, dims := uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[4:]))
	if n == 0 || dims == 0 || uint64(len(b)-8) != 4*n*dims {
		return nil, fmt.Errorf("%w: item vectors: %d bytes for %d vectors of %d", ErrCorrupt, len(b), n, dims)
	}
	out := make([][]float32, n)
	p := b[8:]
	for i := range out {
		v := make([]float32, dims)
		for j := range v {
			v[j] = math.Float32frombits(binary.LittleEndian.Uint32(p))
			p = p[4:]
		}
		out[i] = v
	}
	return out, nil
}
