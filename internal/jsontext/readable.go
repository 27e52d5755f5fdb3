package jsontext

import (
	"bytes"
	"encoding/json"
	"io"
)

// Readable returns encoded JSON with the escapes encoding/json writes for
// HTML characters (\u003c, \u003e, \u0026) turned back into <, > and &:
// the same JSON value, as people read it. Stored documents hold these
// escapes (encoding/json writes them by default), so JSON shown to a user
// or written to a user's file goes through Readable. An escaped backslash
// is copied as it is: "\\u003c" stays.
func Readable(b []byte) []byte {
	out, rest := appendReadable(make([]byte, 0, len(b)), b)
	return append(out, rest...)
}

// appendReadable appends src to dst with the HTML escapes turned back into
// characters, and returns the tail of src it could not decide on: a
// backslash escape cut off at the end (kept for the next write).
func appendReadable(dst, src []byte) (out, rest []byte) {
	for {
		i := bytes.IndexByte(src, '\\')
		if i < 0 {
			return append(dst, src...), nil
		}
		dst, src = append(dst, src[:i]...), src[i:]
		if len(src) < 2 || (src[1] == 'u' && len(src) < 6) {
			return dst, src
		}
		if src[1] == 'u' {
			if c, ok := htmlEscape(src[2:6]); ok {
				dst, src = append(dst, c), src[6:]
				continue
			}
		}
		dst, src = append(dst, src[:2]...), src[2:]
	}
}

// htmlEscape reads the four hex digits of a \u escape that encoding/json
// writes for an HTML character.
func htmlEscape(hex []byte) (byte, bool) {
	switch string(hex) {
	case "003c", "003C":
		return '<', true
	case "003e", "003E":
		return '>', true
	case "0026":
		return '&', true
	}
	return 0, false
}

// Marshal is json.Marshal without HTML escaping, also inside the
// json.RawMessage values v holds.
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Readable(b), nil
}

// MarshalIndent is json.MarshalIndent without HTML escaping, also inside
// the json.RawMessage values v holds.
func MarshalIndent(v any, prefix, indent string) ([]byte, error) {
	b, err := json.MarshalIndent(v, prefix, indent)
	if err != nil {
		return nil, err
	}
	return Readable(b), nil
}

// Encoder writes JSON values, one a line (or indented), without HTML
// escaping: the JSON a user reads on a terminal or in a file.
type Encoder struct {
	w              io.Writer
	prefix, indent string
}

// NewEncoder returns an encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// SetIndent indents each value as json.MarshalIndent does.
func (e *Encoder) SetIndent(prefix, indent string) { e.prefix, e.indent = prefix, indent }

// Encode writes v and a newline in one write.
func (e *Encoder) Encode(v any) error {
	var b []byte
	var err error
	if e.prefix == "" && e.indent == "" {
		b, err = Marshal(v)
	} else {
		b, err = MarshalIndent(v, e.prefix, e.indent)
	}
	if err != nil {
		return err
	}
	_, err = e.w.Write(append(b, '\n'))
	return err
}

// Writer passes encoded JSON written to it on to another writer through
// Readable, however the text is cut into writes: an escape cut between two
// writes is held until the next one. Flush writes what is held.
type Writer struct {
	w       io.Writer
	pending []byte
	buf     []byte
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p, less an escape it ends in the middle of.
func (r *Writer) Write(p []byte) (int, error) {
	src := p
	if len(r.pending) > 0 {
		src = append(r.pending, p...)
	}
	var rest []byte
	r.buf, rest = appendReadable(r.buf[:0], src)
	r.pending = append([]byte(nil), rest...)
	if _, err := r.w.Write(r.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what Write held back (nothing, once a whole JSON text is
// written).
func (r *Writer) Flush() error {
	if len(r.pending) == 0 {
		return nil
	}
	_, err := r.w.Write(r.pending)
	r.pending = nil
	return err
}
