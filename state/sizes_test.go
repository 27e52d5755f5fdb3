package state_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/state"
)

func TestPatchFieldBytes(t *testing.T) {
	big := json.RawMessage(`"0123456789abcdef0123456789abcdef"`)
	tests := []struct {
		name  string
		patch state.Patch
		want  map[string]int // field → operations on it
	}{
		{"empty", state.Patch{}, map[string]int{}},
		{"one field", state.Patch{{Op: state.OpAdd, Path: "/messages/-", Value: big}}, map[string]int{"messages": 1}},
		{"fields", state.Patch{
			{Op: state.OpAdd, Path: "/messages/-", Value: big},
			{Op: state.OpReplace, Path: "/count", Value: json.RawMessage(`7`)},
			{Op: state.OpRemove, Path: "/messages/0"},
			{Op: state.OpMove, From: "/count", Path: "/kv/old"},
		}, map[string]int{"messages": 2, "count": 1, "kv": 1}},
		{"escaped and root", state.Patch{
			{Op: state.OpReplace, Path: "/a~1b/c", Value: json.RawMessage(`1`)},
			{Op: state.OpTest, Path: "/~0x", Value: json.RawMessage(`1`)},
			{Op: state.OpReplace, Path: "", Value: json.RawMessage(`{}`)},
		}, map[string]int{"a/b": 1, "~x": 1, "": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := state.EncodePatch(nil, tc.patch)
			got := map[string]int{}
			ops := map[string]int{}
			total := 0
			err := state.PatchFieldBytes(enc, func(field string, n int) {
				got[field] += n
				ops[field]++
				total += n
			})
			if err != nil {
				t.Fatal(err)
			}
			// Each operation's bytes are what encoding it alone adds.
			want := map[string]int{}
			for _, op := range tc.patch {
				field := fieldOf(op.Path)
				want[field] += len(state.EncodePatch(nil, state.Patch{op})) - len(state.EncodePatch(nil, state.Patch{}))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(ops) != fmt.Sprint(tc.want) {
				t.Fatalf("bytes %v, want %v; operations %v, want %v", got, want, ops, tc.want)
			}
			if header := len(enc) - total; header != 2 {
				t.Fatalf("%d bytes counted for no field, want the 2 of the header", header)
			}
		})
	}
}

// fieldOf is the first token of a JSON pointer, unescaped.
func fieldOf(path string) string {
	first, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(first)
}

func TestDocFieldBytes(t *testing.T) {
	schema := state.MustSchema(
		state.WithField("messages", state.ReducerMessages),
		state.WithField("kv", state.ReducerMerge),
		state.WithField("count", state.ReducerReplace),
	)
	update := state.Update{
		"messages": []state.Message{{ID: "m1", Role: "user", Content: "hello there"}, {ID: "m2", Role: "assistant", Content: "hi"}},
		"kv":       map[string]any{"a": 1, "b": "two"},
		"count":    3,
	}
	doc, _, err := schema.Apply(state.EmptyDoc(), update)
	if err != nil {
		t.Fatal(err)
	}
	enc := state.EncodeDoc(nil, doc)
	got := map[string]int{}
	total := 0
	if err := state.DocFieldBytes(enc, func(field string, n int) { got[field] += n; total += n }); err != nil {
		t.Fatal(err)
	}
	// A field's bytes are what it adds to the document's encoding.
	empty := len(state.EncodeDoc(nil, state.EmptyDoc()))
	for _, f := range []string{"messages", "kv", "count"} {
		only, _, err := schema.Apply(state.EmptyDoc(), state.Update{f: update[f]})
		if err != nil {
			t.Fatal(err)
		}
		if want := len(state.EncodeDoc(nil, only)) - empty; got[f] != want {
			t.Errorf("%s: %d bytes, want %d", f, got[f], want)
		}
	}
	if len(got) != 3 || len(enc)-total != empty {
		t.Fatalf("fields %v; %d bytes for none, want the header's %d", got, len(enc)-total, empty)
	}
}

func TestFieldBytesDamaged(t *testing.T) {
	patch := state.EncodePatch(nil, state.Patch{{Op: state.OpAdd, Path: "/messages/-", Value: json.RawMessage(`"x"`)}})
	doc := state.EncodeDoc(nil, state.EmptyDoc())
	nop := func(string, int) {}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"patch truncated", state.PatchFieldBytes(patch[:len(patch)-1], nop)},
		{"patch trailing", state.PatchFieldBytes(append(patch[:len(patch):len(patch)], 0), nop)},
		{"patch format", state.PatchFieldBytes(append([]byte{9}, patch[1:]...), nop)},
		{"patch op code", state.PatchFieldBytes([]byte{1, 1, 99, 0}, nop)},
		{"patch empty", state.PatchFieldBytes(nil, nop)},
		{"doc format", state.DocFieldBytes([]byte{7, 0}, nop)},
		{"doc form", state.DocFieldBytes([]byte{1, 1, 1, 'a', 9}, nop)},
		{"doc trailing", state.DocFieldBytes(append(doc[:len(doc):len(doc)], 1), nop)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, state.ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", tc.err)
			}
		})
	}
}

// Where a patch's bytes go: each operation counts for the top-level field
// its path names.
func ExamplePatchFieldBytes() {
	p := state.Patch{
		{Op: state.OpAdd, Path: "/messages/-", Value: json.RawMessage(`{"role":"user","content":"hello"}`)},
		{Op: state.OpReplace, Path: "/count", Value: json.RawMessage(`2`)},
	}
	_ = state.PatchFieldBytes(state.EncodePatch(nil, p), func(field string, n int) {
		fmt.Println(field, n)
	})
	// Output:
	// messages 47
	// count 10
}
