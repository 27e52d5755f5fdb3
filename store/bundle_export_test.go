package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
)

// BundleWrite is a pending write of a BundleCheckpoint.
type BundleWrite = bundleWrite

// BundleCheckpoint is a bundle's checkpoint section, for tests that forge
// bundles.
type BundleCheckpoint = bundleCheckpoint

// ForgeBundle rewrites every checkpoint section of bundle b through edit,
// as a forger would: it gives the bundle a correct checksum again, and
// with resum each edited checkpoint its correct row checksum too.
func ForgeBundle(b []byte, resum bool, edit func(*BundleCheckpoint)) []byte {
	out := bytes.Clone(b[:headerLen])
	for off := headerLen; ; {
		kind, flags := b[off], b[off+1]
		n := int(binary.BigEndian.Uint32(b[off+2:]))
		payload := b[off+sectionHdr : off+sectionHdr+n]
		off += sectionHdr + n
		if kind == secEnd {
			break
		}
		if kind == secCheckpoint {
			data, err := sectionData(kind, off, flags, payload, maxSection)
			if err != nil {
				panic(err)
			}
			var bc bundleCheckpoint
			if err := json.Unmarshal(data, &bc); err != nil {
				panic(err)
			}
			edit(&bc)
			if resum {
				bc.Sum = rowDigest(&bc)
			}
			payload, flags = must(marshalPlain(bc)), 0
		}
		out = append(out, kind, flags)
		out = binary.BigEndian.AppendUint32(out, uint32(len(payload)))
		out = append(out, payload...)
	}
	sum := sha256.Sum256(out)
	out = append(out, secEnd, 0, 0, 0, 0, 32)
	return append(out, sum[:]...)
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
