package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// Op names of RFC 6902.
const (
	OpAdd     = "add"
	OpRemove  = "remove"
	OpReplace = "replace"
	OpMove    = "move"
	OpCopy    = "copy"
	OpTest    = "test"
)

// Op is one RFC 6902 operation.
type Op struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Patch is a list of RFC 6902 operations, applied in order.
type Patch []Op

// Size is the number of bytes of JSON values and paths the patch carries; a
// cheap measure of its weight.
func (p Patch) Size() int {
	n := 0
	for _, op := range p {
		n += len(op.Op) + len(op.Path) + len(op.From) + len(op.Value)
	}
	return n
}

// ParsePatch parses RFC 6902 JSON text.
func ParsePatch(data []byte) (Patch, error) {
	var p Patch
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPatch, err)
	}
	for i := range p {
		if err := p[i].check(); err != nil {
			return nil, fmt.Errorf("op %d: %w", i, err)
		}
		if p[i].Value != nil {
			c, err := compact(p[i].Value)
			if err != nil {
				return nil, fmt.Errorf("%w: op %d value: %v", ErrInvalidPatch, i, err)
			}
			p[i].Value = c
		}
	}
	return p, nil
}

func (o *Op) check() error {
	switch o.Op {
	case OpAdd, OpReplace, OpTest:
		if o.Value == nil {
			return fmt.Errorf("%w: %s %q needs a value", ErrInvalidPatch, o.Op, o.Path)
		}
	case OpRemove:
	case OpMove, OpCopy:
		if err := checkPointer(o.From); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: unknown op %q", ErrInvalidPatch, o.Op)
	}
	return checkPointer(o.Path)
}

func checkPointer(p string) error {
	if p != "" && p[0] != '/' {
		return fmt.Errorf("%w: JSON pointer %q must start with /", ErrInvalidPatch, p)
	}
	return nil
}

// splitPointer splits a JSON pointer into its first token and the rest
// ("" when there is none). ok is false for the root pointer.
func splitPointer(p string) (first, rest string, ok bool) {
	if p == "" {
		return "", "", false
	}
	p = p[1:]
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return unescapeToken(p[:i]), p[i:], true
	}
	return unescapeToken(p), "", true
}

// Apply returns the document with the patch applied. The receiver is left
// unchanged; on error the returned document is the zero Doc. The field map
// is copied once per patch, not once per operation.
func (d Doc) Apply(p Patch) (Doc, error) {
	var m map[string]*value // owned copy of d.fields, made on first write
	fields := d.fields
	for i := range p {
		op := &p[i]
		if err := op.check(); err != nil {
			return Doc{}, fmt.Errorf("op %d (%s %s): %w", i, op.Op, op.Path, err)
		}
		field, rest, ok := splitPointer(op.Path)
		if !ok || op.Op == OpMove || op.Op == OpCopy || (op.Op == OpTest && rest == "") {
			nd, err := Doc{fields: fields}.applyGeneric(op)
			if err != nil {
				return Doc{}, fmt.Errorf("op %d (%s %s): %w", i, op.Op, op.Path, err)
			}
			m, fields = nd.fields, nd.fields
			continue
		}
		nv, del, err := applyField(fields[field], op, field, rest)
		if err != nil {
			return Doc{}, fmt.Errorf("op %d (%s %s): %w", i, op.Op, op.Path, err)
		}
		if nv == fields[field] && !del {
			continue
		}
		if m == nil {
			m = make(map[string]*value, len(fields)+1)
			for k, v := range fields {
				m[k] = v
			}
			fields = m
		}
		if del {
			delete(m, field)
		} else {
			m[field] = nv
		}
	}
	return Doc{fields: fields}, nil
}

// applyField applies op to one top-level field (cur is nil when absent). It
// returns the new value, or del when the field is removed.
func applyField(cur *value, op *Op, field, rest string) (nv *value, del bool, err error) {
	if rest == "" {
		switch op.Op {
		case OpAdd:
			return &value{raw: op.Value}, false, nil
		case OpReplace:
			if cur == nil {
				return nil, false, fmt.Errorf("%w: no field %q", ErrPathNotFound, field)
			}
			return &value{raw: op.Value}, false, nil
		case OpRemove:
			if cur == nil {
				return nil, false, fmt.Errorf("%w: no field %q", ErrPathNotFound, field)
			}
			return nil, true, nil
		}
	}
	if cur == nil {
		return nil, false, fmt.Errorf("%w: no field %q", ErrPathNotFound, field)
	}
	nv, err = cur.applyOp(op.Op, rest, op.Value)
	return nv, false, err
}

// applyOp applies an op whose path is below this value (rest is non-empty).
func (v *value) applyOp(kind, rest string, val json.RawMessage) (*value, error) {
	tok, deeper, _ := splitPointer(rest)
	switch {
	case v.list != nil || firstByte(v.raw) == '[':
		l, err := v.asList()
		if err != nil {
			return nil, err
		}
		return v.applyInList(l, kind, tok, deeper, val)
	case v.obj != nil || firstByte(v.raw) == '{':
		m, err := v.asObject()
		if err != nil {
			return nil, err
		}
		return v.applyInObject(m, kind, tok, deeper, val)
	default:
		return nil, fmt.Errorf("%w: cannot descend into a scalar", ErrPathNotFound)
	}
}

// applyInList applies an op at element tok of list l (v's value), or
// below it when deeper is not empty.
func (v *value) applyInList(l *list, kind, tok, deeper string, val json.RawMessage) (*value, error) {
	n := len(l.items)
	if tok == "-" {
		if deeper == "" && kind == OpAdd {
			return &value{list: l.appended(val)}, nil
		}
		return nil, fmt.Errorf("%w: index - only names the end for add", ErrPathNotFound)
	}
	i, err := arrayIndex(tok)
	if err != nil {
		return nil, err
	}
	if deeper == "" && kind == OpAdd {
		if i > n {
			return nil, fmt.Errorf("%w: index %d past end %d", ErrPathNotFound, i, n)
		}
		return &value{list: l.inserted(i, val)}, nil
	}
	if i >= n {
		return nil, fmt.Errorf("%w: index %d past end %d", ErrPathNotFound, i, n)
	}
	if deeper == "" {
		switch kind {
		case OpReplace:
			return &value{list: l.replaced(i, val)}, nil
		case OpRemove:
			return &value{list: l.removed(i)}, nil
		case OpTest:
			if err := testEqual(l.items[i], val); err != nil {
				return nil, err
			}
			return v, nil
		}
	}
	elem, err := applyDeep(l.items[i], kind, deeper, val)
	if err != nil {
		return nil, err
	}
	if kind == OpTest {
		return v, nil
	}
	return &value{list: l.replaced(i, elem)}, nil
}

// applyInObject applies an op at member tok of object m (v's value), or
// below it when deeper is not empty.
func (v *value) applyInObject(m map[string]json.RawMessage, kind, tok, deeper string, val json.RawMessage) (*value, error) {
	old, exists := m[tok]
	if deeper == "" && kind == OpAdd {
		return &value{obj: withMember(m, tok, val)}, nil
	}
	if !exists {
		return nil, fmt.Errorf("%w: no member %q", ErrPathNotFound, tok)
	}
	if deeper == "" {
		switch kind {
		case OpReplace:
			return &value{obj: withMember(m, tok, val)}, nil
		case OpRemove:
			return &value{obj: withMember(m, tok, nil)}, nil
		case OpTest:
			if err := testEqual(old, val); err != nil {
				return nil, err
			}
			return v, nil
		}
	}
	member, err := applyDeep(old, kind, deeper, val)
	if err != nil {
		return nil, err
	}
	if kind == OpTest {
		return v, nil
	}
	return &value{obj: withMember(m, tok, member)}, nil
}

// withMember returns a copy of m with key set to val, or deleted when val is
// nil.
func withMember(m map[string]json.RawMessage, key string, val json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	if val == nil {
		delete(out, key)
	} else {
		out[key] = val
	}
	return out
}

func arrayIndex(tok string) (int, error) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, fmt.Errorf("%w: bad array index %q", ErrPathNotFound, tok)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, fmt.Errorf("%w: bad array index %q", ErrPathNotFound, tok)
		}
	}
	i, err := strconv.Atoi(tok)
	if err != nil {
		return 0, fmt.Errorf("%w: bad array index %q", ErrPathNotFound, tok)
	}
	return i, nil
}

// applyDeep applies one op at path (non-empty) inside the JSON value doc,
// descending one level at a time; each level costs its own size.
func applyDeep(doc json.RawMessage, kind, path string, val json.RawMessage) (json.RawMessage, error) {
	v := &value{raw: doc}
	nv, err := v.applyOp(kind, path, val)
	if err != nil {
		return nil, err
	}
	return nv.json(), nil
}

// applyGeneric applies an op to the whole document with the general
// implementation. Used for move, copy, test and root paths: rare in Cairn's
// own patches, never on the per-step path.
func (d Doc) applyGeneric(op *Op) (Doc, error) {
	out, err := applyWithLibrary(d.AppendJSON(nil), Patch{*op})
	if err != nil {
		return Doc{}, err
	}
	nd, err := ParseDoc(out)
	if err != nil {
		return Doc{}, fmt.Errorf("%w: result is not an object", ErrInvalidPatch)
	}
	return nd, nil
}

func applyWithLibrary(doc []byte, p Patch) (json.RawMessage, error) {
	pj, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPatch, err)
	}
	lp, err := jsonpatch.DecodePatch(pj)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPatch, err)
	}
	opts := jsonpatch.NewApplyOptions()
	opts.EnsurePathExistsOnAdd = false
	out, err := lp.ApplyWithOptions(doc, opts)
	if err != nil {
		if errors.Is(err, jsonpatch.ErrTestFailed) {
			return nil, fmt.Errorf("%w: %v", ErrTestFailed, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrPathNotFound, err)
	}
	return compact(out)
}

// testEqual implements the test op's equality: JSON values compared by
// meaning, not by bytes.
func testEqual(a, b json.RawMessage) error {
	if jsonEqual(a, b) {
		return nil
	}
	return fmt.Errorf("%w: value differs", ErrTestFailed)
}

func jsonEqual(a, b json.RawMessage) bool {
	if string(a) == string(b) {
		return true
	}
	x, errx := decodeAny(a)
	y, erry := decodeAny(b)
	if errx != nil || erry != nil {
		return false
	}
	xa, _ := json.Marshal(x) // decoded JSON always marshals; maps sort keys
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func decodeAny(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// FieldPointer returns the JSON pointer of a top-level field ("/" + the
// escaped name).
func FieldPointer(field string) string { return "/" + escapeToken(field) }

// AsPatch returns the patch that builds d from the empty document: one add
// per field, in sorted order.
func (d Doc) AsPatch() Patch {
	p := make(Patch, 0, len(d.fields))
	for _, f := range d.Fields() {
		p = append(p, Op{Op: OpAdd, Path: FieldPointer(f), Value: d.fields[f].json()})
	}
	return p
}
