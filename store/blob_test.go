package store

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestBlobWriter: a payload written a piece at a time comes back whole,
// raw or compressed in blocks, whatever the sizes of the pieces; damage
// anywhere is caught; blocks never decode past the claimed length.
func TestBlobWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"cairn ", "commits ", "every ", "step ", "and ", "resumes ", "after ", "a ", "crash ", "\n"}
	text := func(n int) []byte {
		b := make([]byte, 0, n+16)
		for len(b) < n {
			b = append(b, words[rng.IntN(len(words))]...)
		}
		return b[:n]
	}
	var raw, chunk []byte
	for _, tc := range []struct {
		name  string
		size  int
		piece int
	}{
		{"empty", 0, 1}, {"small", 100, 7}, {"one block less a byte", blobChunk - 1, 4096},
		{"one block", blobChunk, blobChunk}, {"blocks and a piece", 3*blobChunk + 12345, 65536}, {"a piece over blocks", 2*blobChunk + 1, 3 * blobChunk},
	} {
		for _, comp := range []bool{false, true} {
			payload := text(tc.size)
			// The buffers of the case before are reused, with its bytes
			// still in them.
			bw := newBlobWriter(comp, raw, chunk)
			for p := payload; len(p) > 0; {
				k := min(tc.piece, len(p))
				if n, err := bw.Write(p[:k]); n != k || err != nil {
					t.Fatalf("%s: write %d: %d %v", tc.name, k, n, err)
				}
				p = p[k:]
			}
			b := bw.finish()
			if comp {
				raw, chunk = bw.raw, bw.comp
			}
			got, err := decodeBlob(b)
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("%s (compress %v): round trip: %v", tc.name, comp, err)
			}
			if comp && tc.size > 1000 && len(b) >= tc.size {
				t.Errorf("%s: %d bytes compressed to %d", tc.name, tc.size, len(b))
			}
			for _, i := range []int{0, 1, 4, blobHeader, blobHeader + 7, blobHeader + 8, len(b) / 2, len(b) - 1} {
				if i >= len(b) {
					continue
				}
				bad := bytes.Clone(b)
				bad[i] ^= 0x21
				if out, err := decodeBlob(bad); err == nil && bytes.Equal(out, payload) && i > 0 {
					t.Fatalf("%s: a flip at byte %d went unnoticed", tc.name, i)
				}
			}
			if _, err := decodeBlob(b[:len(b)-1]); err == nil && tc.size > 0 {
				t.Fatalf("%s: a truncated blob decoded", tc.name)
			}
		}
	}
}

// FuzzDecodeChunks: a damaged chunked blob is an error, never a panic or
// a buffer past its claimed length.
func FuzzDecodeChunks(f *testing.F) {
	bw := newBlobWriter(true, nil, nil)
	_, _ = bw.Write(bytes.Repeat([]byte("cairn "), 1000))
	f.Add(bw.finish()[blobHeader:])
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if out, err := decodeChunks(b); err == nil && len(b) >= 8 && uint64(len(out)) > maxDecoded {
			t.Fatalf("decoded %d bytes", len(out))
		}
	})
}
