package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// writeIndented prints what json.Indent does (plus the newline the
// encoder ends with) for any compact JSON.
func checkIndented(t *testing.T, compact []byte) {
	t.Helper()
	var want, got bytes.Buffer
	if err := json.Indent(&want, compact, "", "  "); err != nil {
		return
	}
	want.WriteByte('\n')
	if err := writeIndented(&got, compact); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("%s:\n got %q\nwant %q", compact, got.String(), want.String())
	}
	// The same text written a byte at a time: cuts between writes change
	// nothing.
	var cut bytes.Buffer
	ind := newIndenter(&cut)
	for i := range compact {
		if _, err := ind.Write(compact[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := ind.Close(); err != nil {
		t.Fatal(err)
	}
	if cut.String() != want.String() {
		t.Fatalf("%s written a byte at a time:\n got %q\nwant %q", compact, cut.String(), want.String())
	}
}

func TestWriteIndented(t *testing.T) {
	for _, s := range []string{`{}`, `[]`, `1`, `"x"`, `{"a":1}`, `{"a":[],"b":{},"c":[1,{"d":"e"}]}`,
		`{"q":"a \"quoted\" {string} with [brackets], colons: and \\ slashes"}`, `[[[]],{"":null}]`, `{"u":"\u00e9\n"}`} {
		checkIndented(t, []byte(s))
	}
}

func FuzzWriteIndented(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"c\\\"d"}]}`, `[]`, `{"x":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var compact bytes.Buffer
		if json.Compact(&compact, b) != nil {
			return
		}
		checkIndented(t, compact.Bytes())
	})
}
