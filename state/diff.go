package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// Diff returns an RFC 6902 patch that turns document a into document b:
// objects are compared member by member, lists element by element (the
// elements both share in place, then the rest added or removed at the
// end), and anything else that differs is replaced whole. Diff(a, a) is
// empty, and a.Apply(Diff(a, b)) equals b. It is what tools that compare
// two states (replay) show; the stores never need it, since reducers
// give each step's patch as they apply it.
func Diff(a, b Doc) (Patch, error) {
	return DiffJSON(a.AppendJSON(nil), b.AppendJSON(nil))
}

// DiffJSON is Diff over two JSON texts (any values, not only objects);
// the whole document's pointer is "".
func DiffJSON(a, b []byte) (Patch, error) {
	x, err := decodeAny(a)
	if err != nil {
		return nil, fmt.Errorf("%w: diff: the first value: %v", ErrInvalidJSON, err)
	}
	y, err := decodeAny(b)
	if err != nil {
		return nil, fmt.Errorf("%w: diff: the second value: %v", ErrInvalidJSON, err)
	}
	var p Patch
	diffValue(&p, "", x, y)
	return p, nil
}

func diffValue(p *Patch, path string, x, y any) {
	switch xv := x.(type) {
	case map[string]any:
		if yv, ok := y.(map[string]any); ok {
			diffObject(p, path, xv, yv)
			return
		}
	case []any:
		if yv, ok := y.([]any); ok {
			diffList(p, path, xv, yv)
			return
		}
	}
	if !sameValue(x, y) {
		*p = append(*p, Op{Op: OpReplace, Path: path, Value: mustMarshal(y)})
	}
}

func diffObject(p *Patch, path string, x, y map[string]any) {
	keys := make([]string, 0, len(x)+len(y))
	for k := range x {
		keys = append(keys, k)
	}
	for k := range y {
		if _, ok := x[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		at := path + "/" + escapeToken(k)
		xv, inX := x[k]
		yv, inY := y[k]
		switch {
		case !inY:
			*p = append(*p, Op{Op: OpRemove, Path: at})
		case !inX:
			*p = append(*p, Op{Op: OpAdd, Path: at, Value: mustMarshal(yv)})
		default:
			diffValue(p, at, xv, yv)
		}
	}
}

func diffList(p *Patch, path string, x, y []any) {
	n := min(len(x), len(y))
	for i := 0; i < n; i++ {
		diffValue(p, path+"/"+strconv.Itoa(i), x[i], y[i])
	}
	for i := len(x) - 1; i >= n; i-- { // from the end, so each index still names its element
		*p = append(*p, Op{Op: OpRemove, Path: path + "/" + strconv.Itoa(i)})
	}
	for i := n; i < len(y); i++ {
		*p = append(*p, Op{Op: OpAdd, Path: path + "/-", Value: mustMarshal(y[i])})
	}
}

func sameValue(x, y any) bool {
	return bytes.Equal(mustMarshal(x), mustMarshal(y))
}

// mustMarshal encodes a value decoded from JSON (which always encodes).
func mustMarshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
