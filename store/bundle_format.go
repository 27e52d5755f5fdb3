package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/klauspost/compress/s2"
)

// A bundle's bytes (docs/bundles.md):
//
//	magic "CAIRNBDL" | format uint16 BE
//	section*: kind byte | flags byte | length uint32 BE | payload
//	end section: kind 'Z' | 0 | 32 | SHA-256 of every byte before it
//
// A payload is a JSON document, S2-compressed when flags is 1. The
// sections come in this order: 'M' the manifest, 'T' the thread, 'C' one
// per checkpoint (its pending writes with it), namespace by namespace,
// each in seq order, 'R' one per run (its events with it), then 'Z'.
const (
	bundleMagic = "CAIRNBDL"
	// BundleFormat is the version of the bundle format this code writes
	// and the newest it reads.
	BundleFormat = 1

	secManifest   = 'M'
	secThread     = 'T'
	secCheckpoint = 'C'
	secRun        = 'R'
	secEnd        = 'Z'

	flagS2 = 1

	headerLen  = len(bundleMagic) + 2
	sectionHdr = 6
	// maxSection bounds a section's payload, stored and decoded.
	maxSection = 256 << 20
)

// ErrBadBundle: bytes given as a bundle are not one this code can import
// (damaged, cut short, forged, or not a bundle at all). The error says
// what and where; nothing was created.
var ErrBadBundle = errors.New("store: not a valid thread bundle")

// bundleError is an ErrBadBundle naming where the bundle is wrong.
func bundleError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadBundle}, args...)...)
}

// bundleWriter writes sections and hashes every byte it writes.
type bundleWriter struct {
	w   io.Writer
	sum hash.Hash
	n   int64
	buf []byte
}

func newBundleWriter(w io.Writer) (*bundleWriter, error) {
	bw := &bundleWriter{w: w, sum: sha256.New()}
	hdr := binary.BigEndian.AppendUint16([]byte(bundleMagic), BundleFormat)
	return bw, bw.write(hdr)
}

func (bw *bundleWriter) write(p []byte) error {
	bw.sum.Write(p)
	n, err := bw.w.Write(p)
	bw.n += int64(n)
	return err
}

// section writes one section holding v as JSON, compressed when that is
// smaller.
func (bw *bundleWriter) section(kind byte, v any) error {
	plain, err := marshalPlain(v)
	if err != nil {
		return err
	}
	if len(plain) > maxSection {
		return fmt.Errorf("%w: a %c section of %d bytes (at most %d)", ErrInvalidArgument, kind, len(plain), maxSection)
	}
	flags, payload := byte(0), plain
	if len(plain) >= 64 {
		if c := s2.Encode(bw.buf[:0], plain); len(c) < len(plain) {
			flags, payload, bw.buf = flagS2, c, c
		}
	}
	hdr := binary.BigEndian.AppendUint32([]byte{kind, flags}, uint32(len(payload)))
	if err := bw.write(hdr); err != nil {
		return err
	}
	return bw.write(payload)
}

// end writes the end section: the checksum of everything before it.
func (bw *bundleWriter) end() error {
	sum := bw.sum.Sum(nil)
	hdr := binary.BigEndian.AppendUint32([]byte{secEnd, 0}, uint32(len(sum)))
	if _, err := bw.w.Write(append(hdr, sum...)); err != nil {
		return err
	}
	bw.n += int64(len(hdr) + len(sum))
	return nil
}

// rawSection is a section as read: its kind, its offset in the bundle
// and its payload (decompressed).
type rawSection struct {
	kind byte
	off  int
	data []byte
}

// splitBundle checks a bundle's header, lengths and checksum and returns
// its sections (the end section left out), decompressed. The checksum is
// checked before anything is decompressed, and what decompression makes
// is bounded by the bundle's size (maxExpansion), so that a few bytes
// cannot make it allocate much.
func splitBundle(b []byte) ([]rawSection, error) {
	if len(b) < headerLen || string(b[:len(bundleMagic)]) != bundleMagic {
		return nil, bundleError("no bundle header (a bundle starts with %q)", bundleMagic)
	}
	if v := binary.BigEndian.Uint16(b[len(bundleMagic):]); v != BundleFormat {
		if v > BundleFormat {
			return nil, fmt.Errorf("%w: %w: bundle format %d is newer than this Cairn's (%d): upgrade Cairn to import it", ErrBadBundle, ErrUnsupportedFormat, v, BundleFormat)
		}
		return nil, bundleError("bundle format %d is unknown", v)
	}
	var raw []rawSection
	flags := map[int]byte{}
	for off := headerLen; ; {
		if len(b)-off < sectionHdr {
			return nil, bundleError("cut short at byte %d of %d: no end section", off, len(b))
		}
		kind := b[off]
		n := int(binary.BigEndian.Uint32(b[off+2:]))
		body := off + sectionHdr
		if n > maxSection || n > len(b)-body {
			return nil, bundleError("section %q at byte %d says %d bytes, %d remain", kind, off, n, len(b)-body)
		}
		if kind == secEnd {
			if b[off+1] != 0 {
				return nil, bundleError("end section at byte %d: flags %d", off, b[off+1])
			}
			if err := checkEnd(b, off, b[body:body+n], body+n); err != nil {
				return nil, err
			}
			break
		}
		raw = append(raw, rawSection{kind: kind, off: off, data: b[body : body+n]})
		flags[off] = b[off+1]
		off = body + n
	}
	budget := max(64<<20, maxExpansion*len(b))
	for i := range raw {
		data, err := sectionData(raw[i].kind, raw[i].off, flags[raw[i].off], raw[i].data, budget)
		if err != nil {
			return nil, err
		}
		budget -= len(data)
		raw[i].data = data
	}
	return raw, nil
}

// maxExpansion bounds the bytes a bundle's sections decompress to, as a
// multiple of its size (at least 64 MiB in all).
const maxExpansion = 64

// checkEnd checks the end section at off: the checksum of the bytes
// before it, and nothing after it.
func checkEnd(b []byte, off int, sum []byte, end int) error {
	if end != len(b) {
		return bundleError("%d bytes after the end section", len(b)-end)
	}
	want := sha256.Sum256(b[:off])
	if len(sum) != len(want) || !bytes.Equal(sum, want[:]) {
		return bundleError("checksum mismatch: the bundle was damaged or changed after it was written")
	}
	return nil
}

// sectionData decompresses a section's payload, to at most budget bytes.
func sectionData(kind byte, off int, flags byte, payload []byte, budget int) ([]byte, error) {
	switch flags {
	case 0:
		return payload, nil
	case flagS2:
		n, err := s2.DecodedLen(payload)
		if err != nil || n > maxSection || n > budget {
			return nil, bundleError("section %q at byte %d: bad compressed length", kind, off)
		}
		data, err := s2.Decode(nil, payload)
		if err != nil {
			return nil, bundleError("section %q at byte %d: %v", kind, off, err)
		}
		return data, nil
	}
	return nil, bundleError("section %q at byte %d: unknown flags %d", kind, off, flags)
}

// decodeSection decodes a section's JSON into v, refusing unknown fields.
func decodeSection(s rawSection, v any) error {
	dec := json.NewDecoder(bytes.NewReader(s.data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bundleError("section %q at byte %d: %v", s.kind, s.off, err)
	}
	if dec.More() {
		return bundleError("section %q at byte %d: data after its JSON", s.kind, s.off)
	}
	return nil
}
