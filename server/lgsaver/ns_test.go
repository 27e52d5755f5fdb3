package lgsaver

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

func TestLGNamespace(t *testing.T) {
	for _, c := range []struct{ lg, cairn string }{
		{"", ""},
		{"child", "child"},
		{"inner:1f0c-ab", "inner:1f0c-ab"},
		{"outer:1|inner:2", "outer:1/inner:2"},
		{"my node:1", "my_20node:1"},
		{"a_b/c", "a_5fb_2fc"},
		{"-x", "0__2dx"},
		{"a||b", "a/_/b"},
		{"é", "0__c3_a9"},
		{"|a", "0__/a"},
		{"0_x", "0_5fx"},
	} {
		got, err := lgNamespace(c.lg)
		if err != nil || got != c.cairn {
			t.Errorf("lgNamespace(%q) = %q, %v; want %q", c.lg, got, err, c.cairn)
			continue
		}
		back, err := lgNamespaceOf(got)
		if err != nil || back != c.lg {
			t.Errorf("lgNamespaceOf(%q) = %q, %v; want %q", got, back, err, c.lg)
		}
	}
	for _, bad := range []string{"gate/a_", "a_zz", "a_2D", "a_41"} {
		if got, err := lgNamespaceOf(bad); err == nil {
			t.Errorf("lgNamespaceOf(%q) = %q, want an error", bad, got)
		}
	}
	if _, err := lgNamespace(strings.Repeat("é", 50)); err == nil {
		t.Error("a namespace over 256 bytes once escaped was accepted")
	}
}

// FuzzLGNamespace: every LangGraph namespace maps to a valid Cairn
// namespace (or a clear error) and back to itself; every Cairn namespace
// maps back to a LangGraph one only when that one maps to it.
func FuzzLGNamespace(f *testing.F) {
	for _, s := range []string{"", "child", "outer:1|inner:2", "a_5f", "my node:1", "a||b", "_", "x/_/y", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if c, err := lgNamespace(s); err == nil {
			if err := store.ValidateNamespace(c); err != nil {
				t.Fatalf("lgNamespace(%q) = %q: %v", s, c, err)
			}
			if back, err := lgNamespaceOf(c); err != nil || back != s {
				t.Fatalf("lgNamespaceOf(lgNamespace(%q) = %q) = %q, %v", s, c, back, err)
			}
		}
		if lg, err := lgNamespaceOf(s); err == nil {
			if c, err := lgNamespace(lg); err != nil || c != s {
				t.Fatalf("lgNamespace(lgNamespaceOf(%q) = %q) = %q, %v", s, lg, c, err)
			}
		}
	})
}

// FuzzLGPatch: the patch a put stores turns the parent's state into the
// state the put names, whatever the two values are (lists that grew or
// not, scalars, objects).
func FuzzLGPatch(f *testing.F) {
	f.Add(`{"m":[1,2],"c":1}`, `[1,2,3]`)
	f.Add(`{"m":[{"a":1}]}`, `[{"a":2}]`)
	f.Add(`{"m":"x"}`, `[1]`)
	f.Add(`{}`, `{"k":[1]}`)
	f.Add(`{"m":[1,2,3]}`, `[1]`)
	f.Fuzz(func(t *testing.T, base, value string) {
		d, err := state.ParseDoc([]byte(base))
		if err != nil || !json.Valid([]byte(value)) {
			return
		}
		keep := func(string) bool { return true }
		p, err := lgPatch(d, map[string]lgChannel{"m": {Value: json.RawMessage(value)}}, keep)
		if err != nil {
			return // a value the state cannot hold is refused, not stored
		}
		got, err := d.Apply(p)
		if err != nil {
			t.Fatalf("patch %v does not apply to %s: %v", p, base, err)
		}
		raw, _ := got.Raw("m")
		var want, have any
		_ = json.Unmarshal([]byte(value), &want)
		_ = json.Unmarshal(raw, &have)
		if !reflect.DeepEqual(want, have) {
			t.Fatalf("base %s value %s: patch %v gives %s", base, value, p, raw)
		}
		for _, f := range d.Fields() {
			if f != "m" && !got.Has(f) {
				t.Fatalf("field %s lost", f)
			}
		}
	})
}
