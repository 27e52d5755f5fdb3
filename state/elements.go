package state

import (
	"encoding/json"
	"iter"
)

// Elements yields the elements of a list field in order, each the JSON
// text of one element, which must not be modified. It yields nothing when
// the field is missing or not an array. A list the reducers built (the
// state a runner keeps) is walked as it is held, each element in constant
// time; a list read from JSON is split once. An element that holds the
// same bytes in two versions of a state is usually the same slice in both
// (versions share what they did not change), so comparing slices before
// bytes finds what changed cheaply.
func (d Doc) Elements(field string) iter.Seq2[int, json.RawMessage] {
	return d.ElementsFrom(field, 0)
}

// ElementsFrom is Elements from position from on (the positions yielded
// are the elements' own).
func (d Doc) ElementsFrom(field string, from int) iter.Seq2[int, json.RawMessage] {
	return func(yield func(int, json.RawMessage) bool) {
		l := d.list(field)
		if l == nil {
			return
		}
		for i := max(from, 0); i < len(l.items); i++ {
			if !yield(i, l.items[i]) {
				return
			}
		}
	}
}

// list is field's list (nil: missing, or not an array).
func (d Doc) list(field string) *list {
	v, ok := d.fields[field]
	if !ok {
		return nil
	}
	l, err := v.asList()
	if err != nil {
		return nil
	}
	return l
}

// A ListVersion is one version of a list field, as Doc.ListVersion took
// it, for Doc.Unchanged to tell later which elements a later version
// still shares with it. It keeps that version's elements alive.
type ListVersion struct {
	items []json.RawMessage
}

// ListVersion returns field's list as d holds it (the zero ListVersion
// when the field is missing or not an array).
func (d Doc) ListVersion(field string) ListVersion {
	if l := d.list(field); l != nil {
		return ListVersion{items: l.items}
	}
	return ListVersion{}
}

// Unchanged returns how many leading elements of field in d are, position
// for position, the very elements of version v: the versions a runner
// derives by appending share one backing array, whose positions below the
// length either version saw never change, so the answer costs nothing in
// the list's length. It is 0 when d's list is not one of v's line (it was
// read from JSON, or an edit, a removal or a growth copied it), and then a
// caller compares elements as Elements describes.
func (d Doc) Unchanged(field string, v ListVersion) int {
	l := d.list(field)
	if l == nil || len(l.items) == 0 || len(v.items) == 0 || &l.items[0] != &v.items[0] {
		return 0
	}
	return min(len(l.items), len(v.items))
}
