package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cairn-dev/cairn/internal/jsontext"
)

// Doc is an immutable JSON object: the state of one thread at one checkpoint.
// The zero Doc is the empty object. Docs are safe for concurrent readers.
type Doc struct {
	fields map[string]*value
}

// value is the current value of one top-level field, in one of three forms.
// The form is an internal choice; the JSON meaning is the same.
type value struct {
	raw  json.RawMessage            // formRaw: the compact JSON text
	list *list                      // formList: a JSON array kept as elements
	obj  map[string]json.RawMessage // formObject: a JSON object kept as members
}

// EmptyDoc returns the empty state document.
func EmptyDoc() Doc { return Doc{} }

// Len reports the number of top-level fields.
func (d Doc) Len() int { return len(d.fields) }

// Has reports whether the top-level field is present.
func (d Doc) Has(field string) bool { _, ok := d.fields[field]; return ok }

// Fields returns the names of the top-level fields in sorted order.
func (d Doc) Fields() []string {
	names := make([]string, 0, len(d.fields))
	for k := range d.fields {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Raw returns the JSON text of a top-level field.
func (d Doc) Raw(field string) (json.RawMessage, bool) {
	v, ok := d.fields[field]
	if !ok {
		return nil, false
	}
	return v.json(), true
}

// Get decodes a top-level field into out.
func (d Doc) Get(field string, out any) error {
	raw, ok := d.Raw(field)
	if !ok {
		return &FieldError{Path: "/" + escapeToken(field), Err: ErrNoField}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &FieldError{Path: "/" + escapeToken(field), Err: err}
	}
	return nil
}

// ListLen reports the number of elements of a list field, and whether the
// field holds a JSON array.
func (d Doc) ListLen(field string) (int, bool) {
	v, ok := d.fields[field]
	if !ok {
		return 0, false
	}
	if v.list != nil {
		return len(v.list.items), true
	}
	if v.raw != nil && firstByte(v.raw) == '[' {
		l, err := splitArray(v.raw)
		if err != nil {
			return 0, false
		}
		return len(l.items), true
	}
	return 0, false
}

// Element returns the JSON text of element i of a list field.
func (d Doc) Element(field string, i int) (json.RawMessage, bool) {
	v, ok := d.fields[field]
	if !ok {
		return nil, false
	}
	l, err := v.asList()
	if err != nil || i < 0 || i >= len(l.items) {
		return nil, false
	}
	return l.items[i], true
}

// MarshalJSON encodes the document as a JSON object with sorted keys. Equal
// documents always encode to the same bytes.
func (d Doc) MarshalJSON() ([]byte, error) {
	return d.AppendJSON(nil), nil
}

// AppendJSON appends the canonical JSON text of the document to b.
func (d Doc) AppendJSON(b []byte) []byte {
	b = slices.Grow(b, d.sizeHint())
	b = append(b, '{')
	for i, name := range d.Fields() {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsontext.AppendString(b, name)
		b = append(b, ':')
		b = d.fields[name].appendJSON(b)
	}
	return append(b, '}')
}

// sizeHint is about the length of the document's JSON text (its lists'
// and plain values' exactly, without reading their elements), so that
// AppendJSON grows its buffer once.
func (d Doc) sizeHint() int {
	n := 2
	for name, v := range d.fields {
		n += len(name) + 4
		switch {
		case v.list != nil:
			n += int(v.list.bytes) + len(v.list.items) + 1
		case v.obj != nil:
			n += 64 * len(v.obj)
		default:
			n += len(v.raw)
		}
	}
	return n
}

// String returns the canonical JSON text.
func (d Doc) String() string { return string(d.AppendJSON(nil)) }

// UnmarshalJSON replaces d with the document in data, which must be a JSON
// object.
func (d *Doc) UnmarshalJSON(data []byte) error {
	nd, err := ParseDoc(data)
	if err != nil {
		return err
	}
	*d = nd
	return nil
}

// ParseDoc parses a JSON object into a document.
func ParseDoc(data []byte) (Doc, error) {
	var members map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&members); err != nil {
		return Doc{}, fmt.Errorf("%w: state must be a JSON object: %v", ErrInvalidDoc, err)
	}
	if members == nil {
		return Doc{}, fmt.Errorf("%w: state must be a JSON object, not null", ErrInvalidDoc)
	}
	if dec.More() {
		return Doc{}, fmt.Errorf("%w: trailing data after the state object", ErrInvalidDoc)
	}
	fields := make(map[string]*value, len(members))
	for k, raw := range members {
		c, err := compact(raw)
		if err != nil {
			return Doc{}, &FieldError{Path: "/" + escapeToken(k), Err: err}
		}
		fields[k] = &value{raw: c}
	}
	return Doc{fields: fields}, nil
}

// Equal reports whether two documents have the same JSON meaning (member
// order does not matter; numbers compare by their exact text).
func (d Doc) Equal(o Doc) bool {
	a, b := d.AppendJSON(nil), o.AppendJSON(nil)
	return bytes.Equal(a, b) || jsonEqual(a, b)
}

// with returns a copy of d with field set to v (or removed when v is nil).
// Only the field map is copied: values are shared.
func (d Doc) with(field string, v *value) Doc {
	m := make(map[string]*value, len(d.fields)+1)
	for k, fv := range d.fields {
		m[k] = fv
	}
	nd := Doc{fields: m}
	nd.set(field, v)
	return nd
}

// set sets field to v (or removes it when v is nil) in place: only on a
// Doc whose field map nobody else holds (one that with returned).
func (d Doc) set(field string, v *value) {
	if v == nil {
		delete(d.fields, field)
	} else {
		d.fields[field] = v
	}
}

// json returns the JSON text of the value.
func (v *value) json() json.RawMessage {
	if v.raw != nil {
		return v.raw
	}
	return v.appendJSON(nil)
}

func (v *value) appendJSON(b []byte) []byte {
	switch {
	case v.list != nil:
		b = append(b, '[')
		for i, it := range v.list.items {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, it...)
		}
		return append(b, ']')
	case v.obj != nil:
		keys := make([]string, 0, len(v.obj))
		for k := range v.obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsontext.AppendString(b, k)
			b = append(b, ':')
			b = append(b, v.obj[k]...)
		}
		return append(b, '}')
	default:
		return append(b, v.raw...)
	}
}

// asList returns the value as a list, splitting a raw array once.
func (v *value) asList() (*list, error) {
	if v.list != nil {
		return v.list, nil
	}
	if v.obj != nil || firstByte(v.raw) != '[' {
		return nil, fmt.Errorf("%w: value is not an array", ErrInvalidPatch)
	}
	return splitArray(v.raw)
}

// asObject returns the members of an object value. The map must not be
// modified.
func (v *value) asObject() (map[string]json.RawMessage, error) {
	if v.obj != nil {
		return v.obj, nil
	}
	if v.list != nil || firstByte(v.raw) != '{' {
		return nil, fmt.Errorf("%w: value is not an object", ErrInvalidPatch)
	}
	return splitObject(v.raw)
}

func splitArray(raw []byte) (*list, error) {
	if string(raw) == "[]" {
		return newList(nil), nil
	}
	var items []json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&items); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidDoc, err)
	}
	for i, it := range items {
		c, err := compact(it)
		if err != nil {
			return nil, err
		}
		items[i] = c
	}
	return newList(items), nil
}

func splitObject(raw []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidDoc, err)
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	for k, it := range m {
		c, err := compact(it)
		if err != nil {
			return nil, err
		}
		m[k] = c
	}
	return m, nil
}

// compact returns the compact form of a JSON value, validating it.
func compact(raw []byte) (json.RawMessage, error) {
	if isCompactScalar(raw) {
		return raw, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidJSON, err)
	}
	if buf.Len() == 0 {
		return nil, fmt.Errorf("%w: empty value", ErrInvalidJSON)
	}
	return buf.Bytes(), nil
}

// isCompactScalar recognises the common literals that need no work.
func isCompactScalar(raw []byte) bool {
	switch string(raw) {
	case "null", "true", "false", "[]", "{}", `""`:
		return true
	}
	return false
}

func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// escapeToken escapes a JSON Pointer reference token (RFC 6901).
func escapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// unescapeToken reverses escapeToken.
func unescapeToken(s string) string {
	if !strings.Contains(s, "~") {
		return s
	}
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
}

// cloneItems returns a copy of items with room for extra more elements.
func cloneItems(items []json.RawMessage, extra int) []json.RawMessage {
	out := make([]json.RawMessage, len(items), len(items)+max(extra, len(items)/2+4))
	copy(out, items)
	return out
}
