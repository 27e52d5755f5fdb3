package state_test

import (
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/state"
)

// A schema names each field's reducer; Apply merges an update and returns
// the patch that describes the change.
func ExampleSchema_Apply() {
	schema := state.MustSchema(
		state.WithField("messages", state.ReducerMessages),
		state.WithField("tokens", state.ReducerAdd),
	)
	doc, patch, err := schema.Apply(state.EmptyDoc(), state.Update{
		"messages": state.Message{ID: "m1", Role: "user", Content: "hi"},
		"tokens":   12,
	})
	if err != nil {
		panic(err)
	}
	doc, patch, err = schema.Apply(doc, state.Update{
		"messages": []state.Message{{ID: "m1", Role: "user", Content: "hello"}, {ID: "m2", Role: "assistant", Content: "hey"}},
		"tokens":   30,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(doc)
	p, _ := json.Marshal(patch)
	fmt.Println(string(p))
	// Output:
	// {"messages":[{"id":"m1","role":"user","content":"hello"},{"id":"m2","role":"assistant","content":"hey"}],"tokens":42}
	// [{"op":"replace","path":"/messages/0","value":{"id":"m1","role":"user","content":"hello"}},{"op":"add","path":"/messages/-","value":{"id":"m2","role":"assistant","content":"hey"}},{"op":"replace","path":"/tokens","value":42}]
}

// Typed state: a struct whose tags name the reducers, with the QitOS
// built-in fields embedded.
func ExampleTyped() {
	type Research struct {
		state.Base
		Scratchpad []string `json:"scratchpad" cairn:"append"`
		Confidence float64  `json:"confidence"`
	}
	typed, err := state.NewTyped[Research]()
	if err != nil {
		panic(err)
	}
	doc, err := typed.Encode(Research{Base: state.NewBase("summarize paper.pdf", 10)})
	if err != nil {
		panic(err)
	}
	doc, _, err = typed.Apply(doc, state.Update{"scratchpad": "read abstract", "current_step": 1, "confidence": 0.4})
	if err != nil {
		panic(err)
	}
	s, err := typed.Decode(doc)
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Task, s.CurrentStep, s.Scratchpad, s.Confidence)
	// Output: summarize paper.pdf 1 [read abstract] 0.4
}

// The key-value section: reads see earlier writes; the writes become one
// update of the kv field.
func ExampleKV() {
	schema := state.MustSchema(state.WithField(state.KVField, state.ReducerMerge))
	doc := state.EmptyDoc()
	kv := state.NewKV(doc)
	_ = kv.Set("user-name", "Alice")
	_ = kv.Set("files", map[string]string{"main.go": "package main"})
	var name string
	ok, _ := kv.Get("user-name", &name)
	fmt.Println(ok, name, kv.Has("files"))
	doc, _, err := schema.Apply(doc, kv.Update())
	if err != nil {
		panic(err)
	}
	fmt.Println(doc)
	// Output:
	// true Alice true
	// {"kv":{"files":{"main.go":"package main"},"user-name":"Alice"}}
}

// Migrations bring an old state to the current schema version.
func ExampleMigrations() {
	m := state.NewMigrations(2)
	_ = m.Register(1, func(d state.Doc) (state.Doc, error) {
		var name string
		if err := d.Get("name", &name); err != nil {
			return state.Doc{}, err
		}
		return state.MustSchema().ApplyNoPatch(d, state.Update{"display_name": name})
	})
	old, _ := state.ParseDoc([]byte(`{"name":"ada"}`))
	cur, err := m.Migrate(old)
	fmt.Println(cur, err)
	// Output: {"display_name":"ada","name":"ada","schema_version":2} <nil>
}

// A patch replays onto a document; the original is unchanged.
func ExampleDoc_Apply() {
	doc, _ := state.ParseDoc([]byte(`{"count":1,"items":["a"]}`))
	patch, _ := state.ParsePatch([]byte(`[{"op":"add","path":"/items/-","value":"b"},{"op":"replace","path":"/count","value":2}]`))
	next, err := doc.Apply(patch)
	fmt.Println(next, doc, err)
	// Output: {"count":2,"items":["a","b"]} {"count":1,"items":["a"]} <nil>
}

// Elements walks a list field without decoding it; a new version of the
// state shares the elements it did not change.
func ExampleDoc_Elements() {
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
	one, _, _ := schema.Apply(state.EmptyDoc(), state.Update{"messages": state.Message{ID: "m1", Role: "user", Content: "hi"}})
	two, _, _ := schema.Apply(one, state.Update{"messages": state.Message{ID: "m2", Role: "assistant", Content: "hello"}})
	var first json.RawMessage
	for _, m := range one.Elements("messages") {
		first = m
	}
	for i, m := range two.Elements("messages") {
		fmt.Println(i, string(m), i == 0 && &m[0] == &first[0])
	}
	// Output:
	// 0 {"id":"m1","role":"user","content":"hi"} true
	// 1 {"id":"m2","role":"assistant","content":"hello"} false
}

// Unchanged tells how many leading elements a later version still shares
// with one taken before, without reading them: a reader of a growing list
// reads only what came after.
func ExampleDoc_Unchanged() {
	schema := state.MustSchema(state.WithField("messages", state.ReducerMessages))
	one, _, _ := schema.Apply(state.EmptyDoc(), state.Update{"messages": state.Message{ID: "m1", Role: "user", Content: "hi"}})
	seen := one.ListVersion("messages")
	two, _, _ := schema.Apply(one, state.Update{"messages": state.Message{ID: "m2", Role: "assistant", Content: "hello"}})
	from := two.Unchanged("messages", seen)
	for i, m := range two.ElementsFrom("messages", from) {
		fmt.Println(i, string(m))
	}
	// Output:
	// 1 {"id":"m2","role":"assistant","content":"hello"}
}
