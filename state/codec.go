package state

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
)

// Binary encodings of documents and patches, as the stores write them. The
// first byte is the format version. Strings and JSON values are length
// prefixed (uvarint), so decoding never scans JSON text and a decoded
// document shares the input buffer: callers must not modify it afterwards.

const (
	docFormatV1   = 1
	patchFormatV1 = 1
)

const (
	formRaw    = 0
	formList   = 1
	formObject = 2
)

var opCodes = map[string]byte{OpAdd: 1, OpRemove: 2, OpReplace: 3, OpMove: 4, OpCopy: 5, OpTest: 6}

var opNames = [...]string{1: OpAdd, 2: OpRemove, 3: OpReplace, 4: OpMove, 5: OpCopy, 6: OpTest}

// EncodeDoc appends the binary form of d to b.
func EncodeDoc(b []byte, d Doc) []byte {
	b = slices.Grow(b, encodedDocSize(d))
	b = append(b, docFormatV1)
	names := d.Fields()
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		v := d.fields[name]
		b = appendBytes(b, []byte(name))
		switch {
		case v.list != nil:
			b = append(b, formList)
			b = binary.AppendUvarint(b, uint64(len(v.list.items)))
			for _, it := range v.list.items {
				b = appendBytes(b, it)
			}
		case v.obj != nil:
			b = append(b, formObject)
			b = binary.AppendUvarint(b, uint64(len(v.obj)))
			for k, it := range v.obj {
				b = appendBytes(b, []byte(k))
				b = appendBytes(b, it)
			}
		default:
			b = append(b, formRaw)
			b = appendBytes(b, v.raw)
		}
	}
	return b
}

// EncodedDocSize is the size of EncodeDoc's output for d, computed
// without encoding it.
func EncodedDocSize(d Doc) int { return encodedDocSize(d) }

// Footprint estimates the bytes d holds in memory: its values' bytes plus
// what each list element and object member costs beside them (a slice
// header, the list's spare capacity, an id index entry, a map slot). A
// cache that weighs states by it stays near its budget.
func Footprint(d Doc) int64 {
	const perElem = 56
	n := int64(0)
	for name, v := range d.fields {
		n += int64(len(name)) + perElem
		switch {
		case v.list != nil:
			n += int64(cap(v.list.items))*perElem + v.list.bytes
		case v.obj != nil:
			for k, it := range v.obj {
				n += int64(len(k)+len(it)) + perElem
			}
		default:
			n += int64(len(v.raw))
		}
	}
	return n
}

// encodedDocSize is the exact size of EncodeDoc's output.
func encodedDocSize(d Doc) int {
	n := 1 + uvarintLen(len(d.fields))
	for name, v := range d.fields {
		n += uvarintLen(len(name)) + len(name) + 1
		switch {
		case v.list != nil:
			n += uvarintLen(len(v.list.items))
			for _, it := range v.list.items {
				n += uvarintLen(len(it)) + len(it)
			}
		case v.obj != nil:
			n += uvarintLen(len(v.obj))
			for k, it := range v.obj {
				n += uvarintLen(len(k)) + len(k) + uvarintLen(len(it)) + len(it)
			}
		default:
			n += uvarintLen(len(v.raw)) + len(v.raw)
		}
	}
	return n
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// DecodeDoc decodes the binary form written by EncodeDoc. The document
// shares data. With validate, every JSON value is checked; without it the
// caller vouches for the bytes (the stores checksum them).
func DecodeDoc(data []byte, validate bool) (Doc, error) {
	r := reader{b: data}
	if v := r.byte(); v != docFormatV1 {
		return Doc{}, fmt.Errorf("%w: document format %d", ErrCorrupt, v)
	}
	n := r.count(2)
	fields := make(map[string]*value, n)
	for i := 0; i < n && r.err == nil; i++ {
		name := string(r.bytes())
		form := r.byte()
		var v value
		switch form {
		case formRaw:
			v.raw = r.json(validate)
		case formList:
			k := r.count(1)
			items := make([]json.RawMessage, 0, k)
			for j := 0; j < k && r.err == nil; j++ {
				items = append(items, r.json(validate))
			}
			v.list = newList(items)
		case formObject:
			k := r.count(2)
			m := make(map[string]json.RawMessage, k)
			for j := 0; j < k && r.err == nil; j++ {
				key := string(r.bytes())
				m[key] = r.json(validate)
			}
			v.obj = m
		default:
			r.fail("unknown field form %d", form)
		}
		if _, dup := fields[name]; dup {
			r.fail("field %q twice", name)
		}
		fields[name] = &v
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return Doc{}, r.err
	}
	return Doc{fields: fields}, nil
}

// EncodePatch appends the binary form of p to b.
func EncodePatch(b []byte, p Patch) []byte {
	b = append(b, patchFormatV1)
	b = binary.AppendUvarint(b, uint64(len(p)))
	for _, op := range p {
		b = append(b, opCodes[op.Op])
		b = appendBytes(b, []byte(op.Path))
		switch op.Op {
		case OpMove, OpCopy:
			b = appendBytes(b, []byte(op.From))
		case OpAdd, OpReplace, OpTest:
			b = appendBytes(b, op.Value)
		}
	}
	return b
}

// DecodePatch decodes the binary form written by EncodePatch. Values share
// data.
func DecodePatch(data []byte, validate bool) (Patch, error) {
	r := reader{b: data}
	if v := r.byte(); v != patchFormatV1 {
		return nil, fmt.Errorf("%w: patch format %d", ErrCorrupt, v)
	}
	n := r.count(2)
	p := make(Patch, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		code := r.byte()
		if int(code) >= len(opNames) || opNames[code] == "" {
			r.fail("unknown op code %d", code)
			break
		}
		op := Op{Op: opNames[code], Path: string(r.bytes())}
		switch op.Op {
		case OpMove, OpCopy:
			op.From = string(r.bytes())
		case OpAdd, OpReplace, OpTest:
			op.Value = r.json(validate)
		}
		if r.err == nil {
			if err := op.check(); err != nil {
				r.fail("op %d: %v", i, err)
			}
		}
		p = append(p, op)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return p, nil
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes length-prefixed data, recording the first error.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: at byte %d: %s", ErrCorrupt, r.off, fmt.Sprintf(format, args...))
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	r.off++
	return c
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad length")
		return 0
	}
	r.b = r.b[n:]
	r.off += n
	return v
}

// count reads an element count; each element needs at least min bytes, which
// bounds allocations on damaged input.
func (r *reader) count(min int) int {
	v := r.uvarint()
	if r.err == nil && v > uint64(len(r.b)/min) {
		r.fail("count %d larger than the data", v)
		return 0
	}
	return int(v)
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("length %d past the end", n)
		return nil
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	r.off += int(n)
	return s
}

func (r *reader) json(validate bool) json.RawMessage {
	s := r.bytes()
	if r.err != nil {
		return nil
	}
	if len(s) == 0 {
		r.fail("empty JSON value")
		return nil
	}
	if validate && !json.Valid(s) {
		r.fail("invalid JSON value")
		return nil
	}
	return s
}
