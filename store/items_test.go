package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

func decodeJSON(t testing.TB, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCompileFilter(t *testing.T) {
	value := decodeJSON(t, `{"n":3,"big":9007199254740993,"s":"beta","b":true,"z":null,"l":[1,{"k":"v"}],"o":{"a":1,"b":{"c":"d"}}}`)
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{`{}`, true},
		{`{"n":3}`, true},
		{`{"n":3.0}`, true},
		{`{"n":"3"}`, false},
		{`{"big":9007199254740993}`, true},
		{`{"big":9007199254740992}`, false},
		{`{"big":{"$gt":9007199254740992}}`, true},
		{`{"s":"beta","b":true}`, true},
		{`{"s":"beta","b":false}`, false},
		{`{"z":null}`, true},
		{`{"missing":null}`, true},
		{`{"missing":{"$ne":1}}`, true},
		{`{"missing":{"$eq":1}}`, false},
		{`{"missing":{"$gt":1}}`, false},
		{`{"n":{"$gt":2,"$lte":3}}`, true},
		{`{"n":{"$gt":3}}`, false},
		{`{"n":{"$gte":3,"$lt":3}}`, false},
		{`{"n":{"$ne":3}}`, false},
		{`{"s":{"$gt":"alpha","$lt":"gamma"}}`, true},
		{`{"s":{"$gt":1}}`, false},
		{`{"n":{"$gt":"a"}}`, false},
		{`{"l":[1,{"k":"v"}]}`, true},
		{`{"l":[1]}`, false},
		{`{"l":{"$eq":[1,{"k":"v"}]}}`, true},
		{`{"o":{"a":1}}`, true},
		{`{"o":{"b":{"c":"d"}}}`, true},
		{`{"o":{"b":{"c":"e"}}}`, false},
		{`{"o":{"$eq":{"a":1}}}`, false},
		{`{"o":{"a":{"$gte":1}}}`, true},
		{`{"s":{"b":1}}`, false},
	} {
		f, err := store.CompileFilter(decodeJSON(t, tc.filter))
		if err != nil {
			t.Fatalf("%s: %v", tc.filter, err)
		}
		if got := f.Match(value); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.filter, got, tc.want)
		}
	}
}

func TestCompileFilterErrors(t *testing.T) {
	for _, tc := range []struct{ filter, path string }{
		{`{"$gt":1}`, "$gt"},
		{`{"a":{"$in":[1]}}`, "a.$in"},
		{`{"a":{"$gt":true}}`, "a.$gt"},
		{`{"a":{"$lt":null}}`, "a.$lt"},
		{`{"a":{"$gt":1,"b":2}}`, "a"},
		{`{"a":{"b":{"$x":1}}}`, "a.b.$x"},
		{`{"a":[{"$gte":[]}]}`, "a[0].$gte"},
	} {
		_, err := store.CompileFilter(decodeJSON(t, tc.filter))
		var fe *store.FilterError
		if !errors.As(err, &fe) || fe.Path != tc.path || !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%s: %v, want a FilterError at %s", tc.filter, err, tc.path)
		}
	}
}

func TestParseFieldPath(t *testing.T) {
	for _, ok := range []string{"$", "text", "meta.title", "tags[*]", "a[0].b[-1]", "sections[*].paragraphs[*].text", "m[1][2]"} {
		if err := store.ParseFieldPath(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".a", "a.", "a..b", "[0]", "a[", "a[x]", "a]", "a[0]b", "a[*", "\xff"} {
		if err := store.ParseFieldPath(bad); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%q: %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func TestTerms(t *testing.T) {
	for in, want := range map[string]string{
		"Hello, World!":         "[hello world]",
		"café CAFÉ naïve":       "[café café naïve]",
		"e-mail x_y 1.5 v2":     "[e mail x y 1 5 v2]",
		"  ":                    "[]",
		"日本語 テキスト":              "[日本語 テキスト]",
		"tab\tnew\nline":        "[tab new line]",
		"quote\"d 'single' (p)": "[quote d single p]",
	} {
		if got := fmt.Sprint(driver.Terms(in)); got != want {
			t.Errorf("Terms(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestVectors(t *testing.T) {
	vs := [][]float32{{1, -2.5, 0}, {3, 4, 5e-7}}
	got, err := driver.DecodeVectors(driver.EncodeVectors(vs))
	if err != nil || fmt.Sprint(got) != fmt.Sprint(vs) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	if b := driver.EncodeVectors(nil); b != nil {
		t.Fatalf("no vectors: %x", b)
	}
	for _, bad := range [][]byte{{1}, {1, 0, 0, 0, 2, 0, 0, 0, 1, 2, 3}, {0, 0, 0, 0, 1, 0, 0, 0}} {
		if _, err := driver.DecodeVectors(bad); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%x: %v", bad, err)
		}
	}
}

// FuzzCompileFilter compiles any JSON object as a filter and matches it
// against any JSON object: no panic, and a filter made of a value's own
// fields always matches it.
func FuzzCompileFilter(f *testing.F) {
	for _, s := range [][2]string{
		{`{"a":1}`, `{"a":1.0}`},
		{`{"a":{"$gt":1,"$lte":"x"}}`, `{"a":2}`},
		{`{"o":{"b":[1,{"c":null}]}}`, `{"o":{"b":[1,{"c":null}],"d":2}}`},
		{`{"a":{"$ne":null}}`, `{}`},
		{`{"n":{"$lt":1e400}}`, `{"n":-1e400}`},
		{`{"a":{"$eq":{"$gt":1}}}`, `{"a":{"$gt":1}}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, filter, value []byte) {
		var fm, vm map[string]any
		for _, p := range []struct {
			b []byte
			m *map[string]any
		}{{filter, &fm}, {value, &vm}} {
			dec := json.NewDecoder(bytes.NewReader(p.b))
			dec.UseNumber()
			if dec.Decode(p.m) != nil || *p.m == nil {
				return
			}
		}
		if flt, err := store.CompileFilter(fm); err == nil {
			flt.Match(vm)
		} else if !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("untyped error: %v", err)
		}
		for k, v := range vm {
			if len(k) > 0 && k[0] == '$' || hasOperatorKey(v) {
				continue // $ keys read as operators, not as fields
			}
			self, err := store.CompileFilter(map[string]any{k: v})
			if err != nil {
				t.Fatalf("field %q = %v as a filter: %v", k, v, err)
			}
			if !self.Match(vm) {
				t.Fatalf("field %q = %v does not match its own value %v", k, v, vm)
			}
		}
	})
}

// FuzzDecodeVectors decodes any bytes: an error or vectors that encode
// back to the same bytes.
func FuzzDecodeVectors(f *testing.F) {
	f.Add(driver.EncodeVectors([][]float32{{1, 2}, {3, 4}}))
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 128, 63})
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		vs, err := driver.DecodeVectors(b)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if len(b) > 0 && !bytes.Equal(driver.EncodeVectors(vs), b) {
			t.Fatalf("%x decodes to %v, which encodes otherwise", b, vs)
		}
	})
}

// FuzzParseFieldPath parses any path: no panic, typed errors.
func FuzzParseFieldPath(f *testing.F) {
	for _, s := range []string{"$", "a.b[0][*]", "x[-1]", "a[", "[*]", "a.b.c.d[99999999999999999999]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if err := store.ParseFieldPath(s); err != nil && !errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("untyped error: %v", err)
		}
	})
}

// hasOperatorKey reports whether a JSON value holds an object with a key
// starting with $.
func hasOperatorKey(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if len(k) > 0 && k[0] == '$' || hasOperatorKey(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasOperatorKey(e) {
				return true
			}
		}
	}
	return false
}
