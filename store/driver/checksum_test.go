package driver

import (
	"hash/crc32"
	"strings"
	"testing"
)

// TestCRCSmall: the allocation-free CRC of row headers is CRC-32C.
func TestCRCSmall(t *testing.T) {
	for n := 0; n < 300; n += 7 {
		p := []byte(strings.Repeat("cairn\x00\xff", n)[:n])
		for _, seed := range []uint32{0, 1, 0xdeadbeef} {
			if got, want := crcSmall(seed, p), crc32.Update(seed, castagnoli, p); got != want {
				t.Fatalf("%d bytes from %x: %x, want %x", n, seed, got, want)
			}
		}
	}
}
