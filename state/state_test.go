package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

func mustDoc(t testing.TB, s string) Doc {
	t.Helper()
	d, err := ParseDoc([]byte(s))
	if err != nil {
		t.Fatalf("ParseDoc(%s): %v", s, err)
	}
	return d
}

func seqIDs() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("gen-%d", n) }
}

func TestReducers(t *testing.T) {
	schema := MustSchema(
		WithField("messages", ReducerMessages),
		WithField("items", ReducerAppend),
		WithField("kv", ReducerMerge),
		WithField("n", ReducerAdd),
		WithField("name", ReducerReplace),
	)
	tests := []struct {
		name    string
		start   string
		upd     Update
		want    string
		wantErr error
	}{
		{"replace absent", `{}`, Update{"name": "a"}, `{"name":"a"}`, nil},
		{"replace present", `{"name":"a"}`, Update{"name": 3}, `{"name":3}`, nil},
		{"undeclared replaces", `{"x":1}`, Update{"x": []int{1}}, `{"x":[1]}`, nil},
		{"append to absent", `{}`, Update{"items": []int{1, 2}}, `{"items":[1,2]}`, nil},
		{"append single", `{"items":[1]}`, Update{"items": "z"}, `{"items":[1,"z"]}`, nil},
		{"append empty keeps", `{"items":[1]}`, Update{"items": []int{}}, `{"items":[1]}`, nil},
		{"append null keeps", `{"items":[1]}`, Update{"items": nil}, `{"items":[1]}`, nil},
		{"messages null keeps", `{"messages":[{"id":"a"}]}`, Update{"messages": nil}, `{"messages":[{"id":"a"}]}`, nil},
		{"append to scalar fails", `{"items":3}`, Update{"items": []int{1}}, ``, ErrInvalidUpdate},
		{"merge adds and deletes", `{"kv":{"a":1,"b":2}}`, Update{"kv": map[string]any{"b": nil, "c": 3}}, `{"kv":{"a":1,"c":3}}`, nil},
		{"merge into absent", `{}`, Update{"kv": map[string]any{"a": true}}, `{"kv":{"a":true}}`, nil},
		{"merge non-object fails", `{}`, Update{"kv": []int{1}}, ``, ErrInvalidUpdate},
		{"add ints stay ints", `{"n":40}`, Update{"n": 2}, `{"n":42}`, nil},
		{"add floats", `{"n":1.5}`, Update{"n": 2}, `{"n":3.5}`, nil},
		{"add absent", `{}`, Update{"n": 7}, `{"n":7}`, nil},
		{"add overflow", `{"n":9223372036854775807}`, Update{"n": 1}, ``, ErrInvalidUpdate},
		{"add non-number", `{"n":1}`, Update{"n": "x"}, ``, ErrInvalidUpdate},
		{"messages append assigns id", `{}`, Update{"messages": Message{Role: "user", Content: "hi"}},
			`{"messages":[{"id":"gen-1","role":"user","content":"hi"}]}`, nil},
		{"messages replace by id", `{"messages":[{"id":"a","content":"1"},{"id":"b","content":"2"}]}`,
			Update{"messages": []Message{{ID: "a", Content: "new"}}},
			`{"messages":[{"id":"a","content":"new"},{"id":"b","content":"2"}]}`, nil},
		{"messages remove", `{"messages":[{"id":"a"},{"id":"b"},{"id":"c"}]}`,
			Update{"messages": []Message{RemoveMessage("b"), RemoveMessage("a")}}, `{"messages":[{"id":"c"}]}`, nil},
		{"messages remove missing", `{"messages":[{"id":"a"}]}`, Update{"messages": RemoveMessage("zz")}, ``, ErrMessageNotFound},
		{"messages remove all then add", `{"messages":[{"id":"a"},{"id":"b"}]}`,
			Update{"messages": []any{RemoveAll(), map[string]any{"id": "c"}}}, `{"messages":[{"id":"c"}]}`, nil},
		{"messages non-object", `{}`, Update{"messages": []int{1}}, ``, ErrInvalidUpdate},
		{"messages re-add after remove", `{"messages":[{"id":"a","v":1}]}`,
			Update{"messages": []any{RemoveMessage("a"), map[string]any{"id": "a", "v": 2}}}, `{"messages":[{"id":"a","v":2}]}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := mustDoc(t, tc.start)
			before := start.String()
			got, patch, err := schema.Apply(start, tc.upd, ApplyOptions{NewID: seqIDs()})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Path == "" {
					t.Fatalf("error %v does not name its field", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(mustDoc(t, tc.want)) {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			checkListBytes(t, got)
			if start.String() != before {
				t.Fatalf("input document changed: %s -> %s", before, start)
			}
			// The patch replays to the same document, both in Cairn and in
			// the reference RFC 6902 implementation.
			replayed, err := start.Apply(patch)
			if err != nil {
				t.Fatalf("replay %v: %v", patch, err)
			}
			if !replayed.Equal(got) {
				t.Fatalf("replay = %s, want %s", replayed, got)
			}
			ref := referenceApply(t, start, patch)
			if !mustDoc(t, ref).Equal(got) {
				t.Fatalf("reference replay = %s, want %s", ref, got)
			}
		})
	}
}

func referenceApply(t testing.TB, d Doc, p Patch) string {
	t.Helper()
	pj, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := jsonpatch.DecodePatch(pj)
	if err != nil {
		t.Fatalf("reference decode %s: %v", pj, err)
	}
	out, err := lp.Apply(d.AppendJSON(nil))
	if err != nil {
		t.Fatalf("reference apply %s: %v", pj, err)
	}
	return string(out)
}

func TestVersionsAreIsolated(t *testing.T) {
	schema := MustSchema(WithField("messages", ReducerMessages))
	v0 := EmptyDoc()
	v1, _, err := schema.Apply(v0, Update{"messages": Message{ID: "1", Content: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	// Two branches from v1: both append in what would be the same slot.
	b1, _, err := schema.Apply(v1, Update{"messages": Message{ID: "2", Content: "left"}})
	if err != nil {
		t.Fatal(err)
	}
	b2, _, err := schema.Apply(v1, Update{"messages": Message{ID: "2", Content: "right"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Doc{
		`{"messages":[{"id":"1","content":"a"}]}`:                              v1,
		`{"messages":[{"id":"1","content":"a"},{"id":"2","content":"left"}]}`:  b1,
		`{"messages":[{"id":"1","content":"a"},{"id":"2","content":"right"}]}`: b2,
	}
	for w, d := range want {
		if d.String() != w {
			t.Errorf("got %s, want %s", d, w)
		}
	}
	// Replacing in a branch leaves the other branch and the parent alone.
	b3, _, err := schema.Apply(b1, Update{"messages": Message{ID: "1", Content: "edited"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b3.String(), "edited") || strings.Contains(b1.String(), "edited") || strings.Contains(v1.String(), "edited") {
		t.Fatalf("replace leaked: b3=%s b1=%s v1=%s", b3, b1, v1)
	}
	// An id added on one branch is not seen by the other.
	b4, _, err := schema.Apply(b2, Update{"messages": RemoveMessage("2")})
	if err != nil {
		t.Fatal(err)
	}
	if b4.String() != `{"messages":[{"id":"1","content":"a"}]}` {
		t.Fatalf("b4 = %s", b4)
	}
}

func TestPatchApply(t *testing.T) {
	start := `{"a":{"b":[1,2,{"c":"d"}]},"list":[1,2,3],"obj":{"k":"v"},"s":"x"}`
	tests := []struct {
		name    string
		patch   string
		wantErr error
	}{
		{"add member", `[{"op":"add","path":"/obj/n","value":1}]`, nil},
		{"add index", `[{"op":"add","path":"/list/1","value":9}]`, nil},
		{"add end", `[{"op":"add","path":"/list/3","value":9}]`, nil},
		{"add past end", `[{"op":"add","path":"/list/5","value":9}]`, ErrPathNotFound},
		{"remove index", `[{"op":"remove","path":"/list/0"}]`, nil},
		{"replace deep", `[{"op":"replace","path":"/a/b/2/c","value":"e"}]`, nil},
		{"remove deep", `[{"op":"remove","path":"/a/b/2/c"}]`, nil},
		{"move", `[{"op":"move","from":"/obj/k","path":"/moved"}]`, nil},
		{"copy", `[{"op":"copy","from":"/list","path":"/obj/copy"}]`, nil},
		{"test ok", `[{"op":"test","path":"/s","value":"x"}]`, nil},
		{"test fails", `[{"op":"test","path":"/s","value":"y"}]`, ErrTestFailed},
		{"test fails after a move", `[{"op":"move","from":"/obj/k","path":"/moved"},{"op":"test","path":"/s","value":"y"}]`, ErrTestFailed},
		{"test deep ok", `[{"op":"test","path":"/a/b/0","value":1}]`, nil},
		{"replace missing field", `[{"op":"replace","path":"/zz","value":1}]`, ErrPathNotFound},
		{"remove missing member", `[{"op":"remove","path":"/obj/zz"}]`, ErrPathNotFound},
		{"descend scalar", `[{"op":"add","path":"/s/x","value":1}]`, ErrPathNotFound},
		{"leading zero index", `[{"op":"replace","path":"/list/01","value":1}]`, ErrPathNotFound},
		{"escaped tokens", `[{"op":"add","path":"/obj/a~1b~0c","value":1}]`, nil},
	}
	t.Run("empty member name", func(t *testing.T) {
		d := mustDoc(t, `{"m":[{"":"0"}]}`)
		p, err := ParsePatch([]byte(`[{"op":"test","path":"/m/0/","value":"0"},{"op":"add","path":"/m/0/","value":1}]`))
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.Apply(p)
		if err != nil || got.String() != `{"m":[{"":1}]}` {
			t.Fatalf("got %s, %v", got, err)
		}
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := mustDoc(t, start)
			p, err := ParsePatch([]byte(tc.patch))
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.Apply(p)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if d.String() != mustDoc(t, start).String() {
					t.Fatal("failed patch changed the input")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ref := referenceApply(t, d, p); !mustDoc(t, ref).Equal(got) {
				t.Fatalf("got %s, reference %s", got, ref)
			}
		})
	}
}

func TestParsePatchRejects(t *testing.T) {
	for _, in := range []string{`{}`, `[{"op":"nope","path":"/a"}]`, `[{"op":"add","path":"/a"}]`, `[{"op":"add","path":"a","value":1}]`, `[{"op":"move","path":"/a","from":"x"}]`} {
		if _, err := ParsePatch([]byte(in)); !errors.Is(err, ErrInvalidPatch) {
			t.Errorf("ParsePatch(%s) err = %v, want ErrInvalidPatch", in, err)
		}
	}
}

func TestCodecRoundTrip(t *testing.T) {
	schema := MustSchema(WithField("messages", ReducerMessages), WithField("kv", ReducerMerge))
	d := mustDoc(t, `{"s":"x","n":12345678901234567890,"nested":{"a":[1,{"b":null}]}}`)
	d, p, err := schema.Apply(d, Update{"messages": []Message{{ID: "1", Content: "é\n\"q\""}}, "kv": map[string]int{"a/b": 1}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeDoc(EncodeDoc(nil, d), true)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != d.String() {
		t.Fatalf("doc round trip: %s != %s", got, d)
	}
	gp, err := DecodePatch(EncodePatch(nil, p), true)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(p)
	b, _ := json.Marshal(gp)
	if string(a) != string(b) {
		t.Fatalf("patch round trip: %s != %s", b, a)
	}
	// Truncations are all errors, never panics.
	enc := EncodeDoc(nil, d)
	for i := 0; i < len(enc); i++ {
		if _, err := DecodeDoc(enc[:i], true); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated at %d: err = %v", i, err)
		}
	}
}

func TestParseDocRejects(t *testing.T) {
	for _, in := range []string{``, `[]`, `null`, `{"a":}`, `{"a":1} {}`, `"x"`} {
		if _, err := ParseDoc([]byte(in)); !errors.Is(err, ErrInvalidDoc) {
			t.Errorf("ParseDoc(%q) err = %v", in, err)
		}
	}
}

func TestEncodeErrorNamesPath(t *testing.T) {
	schema := MustSchema()
	_, _, err := schema.Apply(EmptyDoc(), Update{"cfg": map[string]any{"ok": 1, "bad": []any{1, make(chan int)}}})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != "/cfg/bad/1" || !errors.Is(err, ErrEncode) {
		t.Fatalf("err = %v, want path /cfg/bad/1", err)
	}
}

func TestStrictSchema(t *testing.T) {
	schema := MustSchema(WithField("a", ""), Strict())
	if _, _, err := schema.Apply(EmptyDoc(), Update{"b": 1}); !errors.Is(err, ErrUnknownField) {
		t.Fatalf("err = %v", err)
	}
	if _, err := NewSchema(WithField("a", "nope")); !errors.Is(err, ErrUnknownReducer) {
		t.Fatalf("err = %v", err)
	}
}

func TestCustomReducer(t *testing.T) {
	maxR := func(cur, upd json.RawMessage) (json.RawMessage, error) {
		var a, b float64
		if cur != nil {
			if err := json.Unmarshal(cur, &a); err != nil {
				return nil, err
			}
		}
		if err := json.Unmarshal(upd, &b); err != nil {
			return nil, err
		}
		return json.Marshal(max(a, b))
	}
	schema := MustSchema(WithReducer("max", maxR), WithField("best", "max"))
	d, _, err := schema.Apply(EmptyDoc(), Update{"best": 3})
	if err != nil {
		t.Fatal(err)
	}
	d, p, err := schema.Apply(d, Update{"best": 2})
	if err != nil {
		t.Fatal(err)
	}
	if d.String() != `{"best":3}` || len(p) != 1 || p[0].Op != OpReplace {
		t.Fatalf("d=%s p=%v", d, p)
	}
	if _, err := NewSchema(WithReducer("append", maxR)); err == nil {
		t.Fatal("overriding a built-in reducer must fail")
	}
}

type chatState struct {
	Base
	KVSection
	Messages []Message      `json:"messages" cairn:"messages"`
	Count    int64          `json:"count" cairn:"add"`
	Profile  *profile       `json:"profile,omitempty"`
	Scores   []float64      `json:"scores,omitempty" cairn:"append"`
	Extra    map[string]any `json:"extra,omitempty" cairn:"merge"`
}

type profile struct {
	Name string `json:"name"`
	Age  int    `json:"age"`
}

func TestTypedRoundTrip(t *testing.T) {
	typed, err := NewTyped[chatState]()
	if err != nil {
		t.Fatal(err)
	}
	if r := typed.Schema().Reducer("messages"); r != ReducerMessages {
		t.Fatalf("messages reducer = %q", r)
	}
	if r := typed.Schema().Reducer("metadata"); r != ReducerMerge {
		t.Fatalf("metadata reducer = %q (built-ins must be flattened)", r)
	}
	in := chatState{Base: NewBase("demo", 5), Count: 1 << 60, Profile: &profile{"ada", 36},
		Extra: map[string]any{"big": json.Number("9007199254740993")}}
	d, err := typed.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	d, _, err = typed.Apply(d, Update{"count": 2, "messages": Message{ID: "m", Content: "x"}, "scores": []float64{0.5}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := typed.Decode(d)
	if err != nil {
		t.Fatal(err)
	}
	if out.Count != 1<<60+2 || out.Profile.Age != 36 || len(out.Messages) != 1 || out.Scores[0] != 0.5 {
		t.Fatalf("decoded %+v", out)
	}
	if n, ok := out.Extra["big"].(json.Number); !ok || n.String() != "9007199254740993" {
		t.Fatalf("big number = %#v", out.Extra["big"])
	}
	again, err := typed.Encode(out)
	if err != nil {
		t.Fatal(err)
	}
	if again.String() != d.String() {
		t.Fatalf("round trip changed:\n%s\n%s", again, d)
	}
}

func TestTypedErrors(t *testing.T) {
	typed, err := NewTyped[chatState]()
	if err != nil {
		t.Fatal(err)
	}
	_, err = typed.Decode(mustDoc(t, `{"max_steps":3,"profile":{"name":"a","age":"old"}}`))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != "/profile/age" || !errors.Is(err, ErrDecode) {
		t.Fatalf("err = %v, want a decode error at /profile/age", err)
	}
	_, err = typed.DecodeStrict(mustDoc(t, `{"max_steps":3,"surprise":1}`))
	if !errors.Is(err, ErrUnknownField) {
		t.Fatalf("strict err = %v", err)
	}
	if _, err := typed.Decode(mustDoc(t, `{"max_steps":0}`)); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("validation err = %v", err)
	}
	if _, err := NewTyped[int](); err == nil {
		t.Fatal("non-struct typed state must fail")
	}
}

func TestBuiltins(t *testing.T) {
	reason := StopReason("bogus")
	tests := []struct {
		name string
		b    Base
		path string
	}{
		{"ok", Base{MaxSteps: 3, CurrentStep: 3}, ""},
		{"negative step", Base{MaxSteps: 3, CurrentStep: -1}, "/current_step"},
		{"zero max", Base{MaxSteps: 0}, "/max_steps"},
		{"past max", Base{MaxSteps: 2, CurrentStep: 3}, "/current_step"},
		{"bad reason", Base{MaxSteps: 2, StopReason: &reason}, "/stop_reason"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.b.Validate()
			if tc.path == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Path != tc.path {
				t.Fatalf("err = %v, want path %s", err, tc.path)
			}
		})
	}
	b := NewBase("t", 3)
	if err := b.SetStop("nope"); !errors.Is(err, ErrUnknownStopReason) || b.StopReason != nil {
		t.Fatalf("SetStop(nope) = %v, reason %v", err, b.StopReason)
	}
	if err := b.SetStop(StopFinal, "42"); err != nil || *b.FinalResult != "42" || !b.Stopped() {
		t.Fatalf("SetStop(final) = %v", err)
	}
	if len(StopReasons()) != 17 {
		t.Fatalf("%d stop reasons", len(StopReasons()))
	}
	if _, err := ParseStopReason("budget_time"); err != nil {
		t.Fatal(err)
	}
}

func TestMigrations(t *testing.T) {
	m := NewMigrations(3)
	if err := m.Register(1, func(d Doc) (Doc, error) {
		var name string
		if err := d.Get("name", &name); err != nil {
			return Doc{}, err
		}
		return MustSchema().ApplyNoPatch(d, Update{"full_name": name})
	}); err != nil {
		t.Fatal(err)
	}
	d := mustDoc(t, `{"name":"ada"}`)
	if _, err := m.Migrate(d); !errors.Is(err, ErrMissingMigration) {
		t.Fatalf("gap err = %v", err)
	}
	if err := m.Register(2, func(d Doc) (Doc, error) { return d, nil }); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(2, func(d Doc) (Doc, error) { return d, nil }); err == nil {
		t.Fatal("duplicate step accepted")
	}
	got, err := m.Migrate(d)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != `{"full_name":"ada","name":"ada","schema_version":3}` {
		t.Fatalf("migrated %s", got)
	}
	if _, err := m.Migrate(mustDoc(t, `{"schema_version":4}`)); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("future version err = %v", err)
	}
	if _, err := m.Migrate(mustDoc(t, `{"schema_version":"x"}`)); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("bad version err = %v", err)
	}
	type v3 struct {
		FullName      string `json:"full_name"`
		SchemaVersion int    `json:"schema_version"`
	}
	typed, err := NewTyped[v3](WithMigrations(m))
	if err != nil {
		t.Fatal(err)
	}
	s, err := typed.Decode(d)
	if err != nil || s.FullName != "ada" || s.SchemaVersion != 3 {
		t.Fatalf("typed migrate: %+v %v", s, err)
	}
}

func TestKV(t *testing.T) {
	schema := MustSchema(WithField(KVField, ReducerMerge))
	d := mustDoc(t, `{"kv":{"files":{"a.go":"package a"},"old":1}}`)
	kv := NewKV(d)
	var files map[string]string
	if ok, err := kv.Get("files", &files); !ok || err != nil || files["a.go"] != "package a" {
		t.Fatalf("get files: %v %v %v", ok, err, files)
	}
	files["b.go"] = "package b"
	if err := kv.Set("files", files); err != nil {
		t.Fatal(err)
	}
	kv.Delete("old")
	if kv.Has("old") || !kv.Has("files") {
		t.Fatal("has after delete/set")
	}
	if err := kv.Set("user-name", "Alice"); err != nil {
		t.Fatal(err)
	}
	if keys := kv.Keys(); strings.Join(keys, ",") != "files,user-name" {
		t.Fatalf("keys %v", keys)
	}
	nd, _, err := schema.Apply(d, kv.Update())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kv":{"files":{"a.go":"package a","b.go":"package b"},"user-name":"Alice"}}`
	if nd.String() != want {
		t.Fatalf("got %s", nd)
	}
	if NewKV(EmptyDoc()).Update() != nil {
		t.Fatal("no writes must give no update")
	}
}

func TestEncodedDocSizeIsExact(t *testing.T) {
	schema := MustSchema(WithField("m", ReducerMessages), WithField("kv", ReducerMerge))
	d, _, err := schema.Apply(mustDoc(t, `{"s":"x","n":1}`), Update{"m": []Message{{ID: "1", Content: strings.Repeat("y", 300)}}, "kv": map[string]int{"a": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(EncodeDoc(nil, d)), encodedDocSize(d); got != want {
		t.Fatalf("encoded %d bytes, size said %d", got, want)
	}
}

func TestAsPatchRebuilds(t *testing.T) {
	d := mustDoc(t, `{"a/b":[1,{"x":"y"}],"n":null,"s":"t","~":{"k":1}}`)
	got, err := EmptyDoc().Apply(d.AsPatch())
	if err != nil || !got.Equal(d) {
		t.Fatalf("rebuilt %s, %v; want %s", got, err, d)
	}
	if FieldPointer("a/b~") != "/a~1b~0" {
		t.Fatal(FieldPointer("a/b~"))
	}
}

// TestIndexHashCollision: a lookup whose hash names another message's
// position still finds the message it asked for.
func TestIndexHashCollision(t *testing.T) {
	var items []json.RawMessage
	for _, id := range []string{"a", "b", "c", "b"} {
		items = append(items, json.RawMessage(`{"id":"`+id+`","role":"user"}`))
	}
	l := newList(items)
	for _, tc := range []struct {
		id   string
		want int
		ok   bool
	}{{"a", 0, true}, {"b", 1, true}, {"c", 2, true}, {"d", 0, false}} {
		if got, ok := l.indexOf(tc.id); got != tc.want || ok != tc.ok {
			t.Fatalf("indexOf(%q) = %d, %v; want %d, %v", tc.id, got, ok, tc.want, tc.ok)
		}
	}
	// Make "c" collide with "a": the index now points "c" at position 0.
	l.tail.mu.Lock()
	l.tail.ids[idKey("c")] = 0
	l.tail.mu.Unlock()
	if got, ok := l.indexOf("c"); got != 2 || !ok {
		t.Fatalf("indexOf(c) after a collision = %d, %v; want 2, true", got, ok)
	}
}

// TestFootprint: a state's footprint counts its values' bytes and what
// each element costs beside them, so it grows with both.
func TestFootprint(t *testing.T) {
	s := MustSchema(WithField("messages", ReducerMessages))
	small, _, err := s.Apply(EmptyDoc(), Update{"messages": []Message{{ID: "a", Role: "user", Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]Message, 1000)
	for i := range msgs {
		msgs[i] = Message{ID: "m" + strconv.Itoa(i), Role: "user", Content: strings.Repeat("x", 200)}
	}
	big, _, err := s.Apply(EmptyDoc(), Update{"messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	fs, fb := Footprint(small), Footprint(big)
	if enc := int64(EncodedDocSize(big)); fb < enc || fb > 2*enc {
		t.Fatalf("footprint of 1000 messages %d; want between its encoding %d and twice that", fb, enc)
	}
	if fs <= 0 || fs*100 > fb {
		t.Fatalf("footprints %d (1 message) and %d (1000)", fs, fb)
	}
}
