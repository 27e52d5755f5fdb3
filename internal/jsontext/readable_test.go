package jsontext

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestReadable(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"html escapes", `{"a":"\u003cbilling\u003e \u0026 co"}`, `{"a":"<billing> & co"}`},
		{"escaped backslash stays", `"\\u003c"`, `"\\u003c"`},
		{"other escapes stay", `"\u2028\n\"\u00e9"`, `"\u2028\n\"\u00e9"`},
		{"no escapes", `[1,2,{"b":null}]`, `[1,2,{"b":null}]`},
		{"cut escape copied", `"a\u00`, `"a\u00`},
		{"trailing backslash copied", `"a\`, `"a\`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(Readable([]byte(tc.in))); got != tc.want {
				t.Fatalf("Readable(%s) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

// TestWriterSplits writes a text cut at every point into a Writer: the
// output is Readable's, whatever the cut.
func TestWriterSplits(t *testing.T) {
	in := []byte(`{"x":"\u003cb\u003e\\u003c \u0026\u2028","y":["\u003e"]}`)
	want := Readable(in)
	for i := 0; i <= len(in); i++ {
		for j := i; j <= len(in); j++ {
			var out bytes.Buffer
			w := NewWriter(&out)
			for _, part := range [][]byte{in[:i], in[i:j], in[j:]} {
				if _, err := w.Write(part); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Fatalf("cut at %d, %d: %s, want %s", i, j, out.Bytes(), want)
			}
		}
	}
}

func TestEncoder(t *testing.T) {
	v := map[string]any{"raw": json.RawMessage(`"\u003cp\u003e"`), "s": "a<b>&c"}
	for _, tc := range []struct {
		name   string
		indent string
		want   string
	}{
		{"line", "", `{"raw":"<p>","s":"a<b>&c"}` + "\n"},
		{"indented", "  ", "{\n  \"raw\": \"<p>\",\n  \"s\": \"a<b>&c\"\n}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			enc := NewEncoder(&out)
			enc.SetIndent("", tc.indent)
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Fatalf("got %q, want %q", out.String(), tc.want)
			}
		})
	}
}

// FuzzReadable: Readable of encoding/json's text is the text encoding/json
// writes without HTML escaping, and decodes to the same value.
func FuzzReadable(f *testing.F) {
	f.Add("<a href=\"x\">&amp;</a>\\u003c\n\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		escaped, _ := json.Marshal(s)
		var plain bytes.Buffer
		enc := json.NewEncoder(&plain)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		got := Readable(escaped)
		if want := strings.TrimSuffix(plain.String(), "\n"); string(got) != want {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
		var back, was string
		_ = json.Unmarshal(escaped, &was)
		if err := json.Unmarshal(got, &back); err != nil || back != was {
			t.Fatalf("%q: decodes to %q, not %q (%v)", s, back, was, err)
		}
	})
}
