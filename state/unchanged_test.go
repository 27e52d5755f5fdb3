package state_test

import (
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/state"
)

// TestUnchanged: versions a runner derives by appending share their
// elements with the version taken, any other version shares none, and
// the elements Unchanged counts are the very ones the taken version held.
func TestUnchanged(t *testing.T) {
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
	msg := func(id, content string) state.Update {
		return state.Update{"messages": state.Message{ID: id, Role: "user", Content: content}}
	}
	grow := func(d state.Doc, from, to int) state.Doc {
		for i := from; i < to; i++ {
			var err error
			if d, _, err = schema.Apply(d, msg(fmt.Sprint("m", i), "x")); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	base := grow(state.EmptyDoc(), 0, 5)
	seen := base.ListVersion("messages")
	replaced, _, err := schema.Apply(base, msg("m2", "changed"))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := state.ParseDoc(base.AppendJSON(nil))
	if err != nil {
		t.Fatal(err)
	}
	// base (5 messages, appended one at a time) has room to grow in place:
	// the first version appended to it shares its array, a second one
	// appended to base after that cannot and copies, as does one that
	// outgrows the room.
	first := grow(base, 5, 6)
	second := grow(base, 100, 101)
	outgrown := grow(first, 6, 300)
	for _, tc := range []struct {
		name string
		d    state.Doc
		want int
	}{
		{"the same version", base, 5},
		{"the first appended to it", first, 5},
		{"a second appended to it", second, 0},
		{"one that outgrew the array", outgrown, 0},
		{"an element replaced", replaced, 0},
		{"read from JSON", parsed, 0},
		{"no such field", state.EmptyDoc(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.d.Unchanged("messages", seen)
			if got != tc.want {
				t.Fatalf("Unchanged = %d, want %d", got, tc.want)
			}
			// whatever it counts is the very elements of the version taken
			var before [][]byte
			for _, m := range base.Elements("messages") {
				before = append(before, m)
			}
			for i, m := range tc.d.Elements("messages") {
				if i < got && &m[0] != &before[i][0] {
					t.Fatalf("element %d counted unchanged is not the one taken", i)
				}
			}
		})
	}
	if got := state.EmptyDoc().Unchanged("messages", state.ListVersion{}); got != 0 {
		t.Fatalf("zero version: %d", got)
	}
}
