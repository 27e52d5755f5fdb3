package state

import (
	"encoding/binary"
	"io"

	"github.com/cairn-dev/cairn/internal/jsontext"
)

// docChunk is how many bytes WriteDoc gathers before it writes them.
const docChunk = 64 << 10

// WriteDoc writes the binary form of d — EncodeDoc's bytes — to w a piece
// at a time, so that a large document is never held twice in memory; it
// returns the bytes written.
func WriteDoc(w io.Writer, d Doc) (int64, error) {
	dw := &docWriter{w: w, buf: make([]byte, 0, docChunk)}
	dw.buf = append(dw.buf, docFormatV1)
	names := d.Fields()
	dw.buf = binary.AppendUvarint(dw.buf, uint64(len(names)))
	for _, name := range names {
		v := d.fields[name]
		dw.bytes([]byte(name))
		switch {
		case v.list != nil:
			dw.buf = append(dw.buf, formList)
			dw.buf = binary.AppendUvarint(dw.buf, uint64(len(v.list.items)))
			for _, it := range v.list.items {
				dw.bytes(it)
			}
		case v.obj != nil:
			dw.buf = append(dw.buf, formObject)
			dw.buf = binary.AppendUvarint(dw.buf, uint64(len(v.obj)))
			for k, it := range v.obj {
				dw.bytes([]byte(k))
				dw.bytes(it)
			}
		default:
			dw.buf = append(dw.buf, formRaw)
			dw.bytes(v.raw)
		}
	}
	dw.flush()
	return dw.n, dw.err
}

// docWriter gathers WriteDoc's output and writes it in chunks.
type docWriter struct {
	w   io.Writer
	buf []byte
	n   int64
	err error
}

// bytes appends a length-prefixed value, writing the gathered bytes out
// when they reach a chunk.
func (dw *docWriter) bytes(p []byte) {
	dw.buf = appendBytes(dw.buf, p)
	if len(dw.buf) >= docChunk {
		dw.flush()
	}
}

func (dw *docWriter) flush() {
	if dw.err == nil && len(dw.buf) > 0 {
		var k int
		k, dw.err = dw.w.Write(dw.buf)
		dw.n += int64(k)
	}
	dw.buf = dw.buf[:0]
}

// WriteJSON writes the canonical JSON text of d — AppendJSON's bytes — to
// w a piece at a time, so that a large document is never held as one text
// in memory; it returns the bytes written.
func (d Doc) WriteJSON(w io.Writer) (int64, error) {
	dw := &docWriter{w: w, buf: make([]byte, 0, docChunk)}
	dw.buf = append(dw.buf, '{')
	for i, name := range d.Fields() {
		if i > 0 {
			dw.buf = append(dw.buf, ',')
		}
		dw.buf = jsontext.AppendString(dw.buf, name)
		dw.buf = append(dw.buf, ':')
		v := d.fields[name]
		if v.list == nil {
			dw.raw(v.appendJSON(nil)) // objects and raw values are one piece
			continue
		}
		dw.buf = append(dw.buf, '[')
		for j, it := range v.list.items {
			if j > 0 {
				dw.buf = append(dw.buf, ',')
			}
			dw.raw(it)
		}
		dw.buf = append(dw.buf, ']')
	}
	dw.buf = append(dw.buf, '}')
	dw.flush()
	return dw.n, dw.err
}

// raw appends p as it is, writing the gathered bytes out when they reach a
// chunk.
func (dw *docWriter) raw(p []byte) {
	dw.buf = append(dw.buf, p...)
	if len(dw.buf) >= docChunk {
		dw.flush()
	}
}
