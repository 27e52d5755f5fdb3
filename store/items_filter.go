package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Filter is a compiled search filter (CompileFilter).
type Filter struct {
	fields []fieldCond
}

type fieldCond struct {
	name string
	m    matcher
}

// matcher tests one JSON value; present is false for a missing field
// (whose value is then nil).
type matcher interface {
	match(v any, present bool) bool
}

// FilterError says where a filter is malformed; it wraps
// ErrInvalidArgument.
type FilterError struct {
	// Path is the place in the filter, as field.field.$op.
	Path string
	Msg  string
}

func (e *FilterError) Error() string { return fmt.Sprintf("store: filter %s: %s", e.Path, e.Msg) }

// Unwrap returns ErrInvalidArgument.
func (e *FilterError) Unwrap() error { return ErrInvalidArgument }

// CompileFilter checks and compiles a search filter, as LangGraph's
// stores read one. Each top-level key names a field of the item's value
// and says what it must be:
//
//   - a scalar: equal to it (numbers by value: 1 equals 1.0; null
//     matches null or a missing field);
//   - an array: an array of the same length whose elements match, in
//     order;
//   - an object without $ keys: an object whose fields match these, as
//     here (other fields may be present);
//   - an object of operators: every one holds. $eq and $ne compare with
//     any JSON value ($ne holds for a missing field); $gt, $gte, $lt and
//     $lte with a number or a string, and hold only for a field of that
//     kind (numbers by value, strings by bytes).
func CompileFilter(f map[string]any) (Filter, error) {
	if len(f) == 0 {
		return Filter{}, nil
	}
	norm, err := normalizeJSON(f)
	if err != nil {
		return Filter{}, &FilterError{Path: "$", Msg: err.Error()}
	}
	m := norm.(map[string]any)
	var out Filter
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if strings.HasPrefix(k, "$") {
			return Filter{}, &FilterError{Path: k, Msg: "a filter's top-level keys are fields of the value; put operators under a field ({\"score\": {\"$gt\": 3}})"}
		}
		mt, err := compileValue(m[k], k)
		if err != nil {
			return Filter{}, err
		}
		out.fields = append(out.fields, fieldCond{name: k, m: mt})
	}
	return out, nil
}

// Match reports whether an item's value matches the filter.
func (f Filter) Match(value map[string]any) bool {
	for _, c := range f.fields {
		v, ok := value[c.name]
		if !c.m.match(v, ok) {
			return false
		}
	}
	return true
}

// normalizeJSON turns a Go value into the JSON types json.Decoder with
// UseNumber makes (map[string]any, []any, json.Number, string, bool, nil).
func normalizeJSON(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	err = dec.Decode(&out)
	return out, err
}

func compileValue(v any, path string) (matcher, error) {
	switch x := v.(type) {
	case map[string]any:
		return compileObject(x, path)
	case []any:
		elems := make([]matcher, len(x))
		for i, e := range x {
			m, err := compileValue(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			elems[i] = m
		}
		return arrayMatch(elems), nil
	}
	return eqMatch{v}, nil
}

func compileObject(x map[string]any, path string) (matcher, error) {
	keys := slices.Sorted(maps.Keys(x))
	ops := 0
	for _, k := range keys {
		if strings.HasPrefix(k, "$") {
			ops++
		}
	}
	if ops > 0 && ops < len(keys) {
		return nil, &FilterError{Path: path, Msg: "an object is either operators ($eq, $ne, $gt, $gte, $lt, $lte) or fields, not both"}
	}
	if ops == 0 {
		fields := objectMatch{}
		for _, k := range keys {
			m, err := compileValue(x[k], path+"."+k)
			if err != nil {
				return nil, err
			}
			fields[k] = m
		}
		return fields, nil
	}
	var all allMatch
	for _, k := range keys {
		m, err := compileOp(k, x[k], path+"."+k)
		if err != nil {
			return nil, err
		}
		all = append(all, m)
	}
	return all, nil
}

func compileOp(op string, v any, path string) (matcher, error) {
	switch op {
	case "$eq":
		return eqMatch{v}, nil
	case "$ne":
		return neMatch{v}, nil
	case "$gt", "$gte", "$lt", "$lte":
		switch v.(type) {
		case json.Number, string:
			return orderMatch{op: op, v: v}, nil
		}
		return nil, &FilterError{Path: path, Msg: fmt.Sprintf("%s compares with a number or a string", op)}
	}
	return nil, &FilterError{Path: path, Msg: fmt.Sprintf("unknown operator %q (want $eq, $ne, $gt, $gte, $lt or $lte)", op)}
}

type eqMatch struct{ v any }

func (m eqMatch) match(v any, _ bool) bool { return jsonEqual(v, m.v) }

type neMatch struct{ v any }

func (m neMatch) match(v any, present bool) bool { return !present || !jsonEqual(v, m.v) }

type allMatch []matcher

func (ms allMatch) match(v any, present bool) bool {
	for _, m := range ms {
		if !m.match(v, present) {
			return false
		}
	}
	return true
}

type arrayMatch []matcher

func (ms arrayMatch) match(v any, _ bool) bool {
	l, ok := v.([]any)
	if !ok || len(l) != len(ms) {
		return false
	}
	for i, m := range ms {
		if !m.match(l[i], true) {
			return false
		}
	}
	return true
}

type objectMatch map[string]matcher

func (ms objectMatch) match(v any, _ bool) bool {
	o, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for k, m := range ms {
		x, ok := o[k]
		if !m.match(x, ok) {
			return false
		}
	}
	return true
}

type orderMatch struct {
	op string
	v  any
}

func (m orderMatch) match(v any, _ bool) bool {
	var c int
	switch want := m.v.(type) {
	case json.Number:
		got, ok := v.(json.Number)
		if !ok {
			return false
		}
		c = compareNumbers(got, want)
	case string:
		got, ok := v.(string)
		if !ok {
			return false
		}
		c = strings.Compare(got, want)
	}
	switch m.op {
	case "$gt":
		return c > 0
	case "$gte":
		return c >= 0
	case "$lt":
		return c < 0
	}
	return c <= 0
}

// compareNumbers compares JSON numbers by value: exactly as integers
// when both fit in 64 bits, else as float64.
func compareNumbers(a, b json.Number) int {
	ai, aerr := strconv.ParseInt(string(a), 10, 64)
	bi, berr := strconv.ParseInt(string(b), 10, 64)
	if aerr == nil && berr == nil {
		return cmp.Compare(ai, bi)
	}
	af, _ := strconv.ParseFloat(string(a), 64) // out of range: ±Inf, which still orders
	bf, _ := strconv.ParseFloat(string(b), 64)
	return cmp.Compare(af, bf)
}

// jsonEqual compares JSON values deeply, numbers by value.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		return ok && compareNumbers(x, y) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}
