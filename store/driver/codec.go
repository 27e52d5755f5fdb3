package driver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
)

// castagnoli is the CRC-32C table of the checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendString appends s with its length as a uvarint.
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// marshalPlain encodes v as compact JSON without HTML escaping, the form
// the engine stores.
func marshalPlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// codecSealed is the first byte of a sealed (encrypted) blob, as store
// writes it.
const codecSealed = 2

// Sealed reports whether a stored blob is sealed (store's encryption at
// rest): plaintext blobs start with another codec byte.
func Sealed(blob []byte) bool { return len(blob) > 0 && blob[0] == codecSealed }

// maxTermBytes bounds the words Terms keeps.
const maxTermBytes = 255
