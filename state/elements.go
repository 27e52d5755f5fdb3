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
	return func(yield func(int, json.RawMessage) bool) {
		v, ok := d.fields[field]
		if !ok {
			return
		}
		l, err := v.asList()
		if err != nil {
			return
		}
		for i, it := range l.items {
			if !yield(i, it) {
				return
			}
		}
	}
}
