package state

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
)

// Built-in reducer names.
const (
	ReducerReplace  = "replace"
	ReducerAppend   = "append"
	ReducerMessages = "messages"
	ReducerMerge    = "merge"
	ReducerAdd      = "add"
)

// ReducerFunc is a custom reducer: it merges update into current (nil when
// the field is absent) and returns the field's new JSON value. Custom
// reducers see whole values, so they cost time proportional to the field.
type ReducerFunc func(current, update json.RawMessage) (json.RawMessage, error)

// reducer is the internal form: it records the operations it performs.
type reducer func(a *applier, field string, cur *value, upd json.RawMessage) (*value, error)

// applier collects the operations reducers perform.
type applier struct {
	ops   Patch
	newID func() string
}

func (a *applier) emit(op, path string, v json.RawMessage) {
	a.ops = append(a.ops, Op{Op: op, Path: path, Value: v})
}

func (a *applier) id() string {
	if a.newID != nil {
		return a.newID()
	}
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "msg-" + hex.EncodeToString(b[:])
}

func reduceReplace(a *applier, field string, cur *value, upd json.RawMessage) (*value, error) {
	if cur == nil {
		a.emit(OpAdd, FieldPointer(field), upd)
	} else {
		a.emit(OpReplace, FieldPointer(field), upd)
	}
	return &value{raw: upd}, nil
}

// reduceAppend appends the elements of an array update (or a single
// non-array value) to a list field.
func reduceAppend(a *applier, field string, cur *value, upd json.RawMessage) (*value, error) {
	elems, err := updateElements(upd)
	if err != nil {
		return nil, err
	}
	l, err := a.startList(field, cur)
	if err != nil {
		return nil, err
	}
	if len(elems) == 0 {
		return listValue(cur, l), nil
	}
	path := FieldPointer(field) + "/-"
	for _, e := range elems {
		a.emit(OpAdd, path, e)
	}
	return &value{list: l.appended(elems...)}, nil
}

// startList returns the current list of a field, emitting an add of the
// empty list when the field is absent or null.
func (a *applier) startList(field string, cur *value) (*list, error) {
	if cur == nil || string(cur.raw) == "null" {
		a.emit(OpAdd, FieldPointer(field), json.RawMessage("[]"))
		return newList(nil), nil
	}
	l, err := cur.asList()
	if err != nil {
		return nil, fmt.Errorf("%w: field holds %s, not a list", ErrInvalidUpdate, kindOf(cur))
	}
	return l, nil
}

// listValue returns cur unchanged when it already is the list, else a new
// value for l.
func listValue(cur *value, l *list) *value {
	if cur != nil && cur.list == l {
		return cur
	}
	return &value{list: l}
}

// updateElements splits an array update into its elements; null is none;
// any other value is one element.
func updateElements(upd json.RawMessage) ([]json.RawMessage, error) {
	if string(upd) == "null" {
		return nil, nil
	}
	if firstByte(upd) != '[' {
		return []json.RawMessage{upd}, nil
	}
	l, err := splitArray(upd)
	if err != nil {
		return nil, err
	}
	return l.items, nil
}

func reduceMerge(a *applier, field string, cur *value, upd json.RawMessage) (*value, error) {
	if firstByte(upd) != '{' {
		return nil, fmt.Errorf("%w: merge needs an object, got %s", ErrInvalidUpdate, kindOfRaw(upd))
	}
	members, err := splitObject(upd)
	if err != nil {
		return nil, err
	}
	var base map[string]json.RawMessage
	if cur == nil || string(cur.raw) == "null" {
		a.emit(OpAdd, FieldPointer(field), json.RawMessage("{}"))
		base = map[string]json.RawMessage{}
	} else if base, err = cur.asObject(); err != nil {
		return nil, fmt.Errorf("%w: field holds %s, not an object", ErrInvalidUpdate, kindOf(cur))
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]json.RawMessage, len(base)+len(members))
	for k, v := range base {
		out[k] = v
	}
	prefix := FieldPointer(field) + "/"
	for _, k := range keys {
		v := members[k]
		if string(v) == "null" {
			if _, ok := out[k]; ok {
				delete(out, k)
				a.emit(OpRemove, prefix+escapeToken(k), nil)
			}
			continue
		}
		out[k] = v
		a.emit(OpAdd, prefix+escapeToken(k), v)
	}
	return &value{obj: out}, nil
}

func reduceAdd(a *applier, field string, cur *value, upd json.RawMessage) (*value, error) {
	var delta json.Number
	if err := json.Unmarshal(upd, &delta); err != nil {
		return nil, fmt.Errorf("%w: add needs a number, got %s", ErrInvalidUpdate, kindOfRaw(upd))
	}
	if cur == nil || string(cur.raw) == "null" {
		a.emit(OpAdd, FieldPointer(field), upd)
		return &value{raw: upd}, nil
	}
	var base json.Number
	if err := json.Unmarshal(cur.json(), &base); err != nil {
		return nil, fmt.Errorf("%w: field holds %s, not a number", ErrInvalidUpdate, kindOf(cur))
	}
	sum, err := addNumbers(base, delta)
	if err != nil {
		return nil, err
	}
	a.emit(OpReplace, FieldPointer(field), sum)
	return &value{raw: sum}, nil
}

// addNumbers adds exactly when both are integers that fit int64, else in
// float64.
func addNumbers(x, y json.Number) (json.RawMessage, error) {
	xi, errx := x.Int64()
	yi, erry := y.Int64()
	if errx == nil && erry == nil {
		s := xi + yi
		if (s > xi) == (yi > 0) {
			return json.RawMessage(fmt.Sprint(s)), nil
		}
		return nil, fmt.Errorf("%w: integer overflow adding %d and %d", ErrInvalidUpdate, xi, yi)
	}
	xf, err1 := x.Float64()
	yf, err2 := y.Float64()
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: numbers out of range", ErrInvalidUpdate)
	}
	b, err := json.Marshal(xf + yf)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidUpdate, err)
	}
	return b, nil
}

func customReducer(fn ReducerFunc) reducer {
	return func(a *applier, field string, cur *value, upd json.RawMessage) (*value, error) {
		var curJSON json.RawMessage
		if cur != nil {
			curJSON = cur.json()
		}
		out, err := fn(curJSON, upd)
		if err != nil {
			return nil, err
		}
		out, err = compact(out)
		if err != nil {
			return nil, fmt.Errorf("custom reducer result: %w", err)
		}
		if cur == nil {
			a.emit(OpAdd, FieldPointer(field), out)
		} else {
			a.emit(OpReplace, FieldPointer(field), out)
		}
		return &value{raw: out}, nil
	}
}

func kindOf(v *value) string {
	switch {
	case v.list != nil:
		return "a list"
	case v.obj != nil:
		return "an object"
	default:
		return kindOfRaw(v.raw)
	}
}

func kindOfRaw(b []byte) string {
	switch firstByte(b) {
	case '[':
		return "a list"
	case '{':
		return "an object"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}
