package yamlerr

import (
	"bytes"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestWhere(t *testing.T) {
	for _, tc := range []struct {
		src      string
		offset   int
		wantLine int
		wantMsg  string
	}{
		{"a: [1\n", 1, 2, "did not find expected ',' or ']'"},
		{"a: 1\nb: : c\n", 10, 12, "mapping values are not allowed in this context"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			var v any
			err := yaml.Unmarshal([]byte(tc.src), &v)
			if err == nil {
				t.Fatal("no error")
			}
			line, msg := Where(err, tc.offset)
			if line != tc.wantLine || msg != tc.wantMsg {
				t.Fatalf("Where = %d %q, want %d %q", line, msg, tc.wantLine, tc.wantMsg)
			}
		})
	}
}

func TestUnknownKey(t *testing.T) {
	src := "name: x\ncolour: red\n"
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Name string `yaml:"name"`
	}
	dec := yaml.NewDecoder(bytes.NewReader([]byte(src)))
	dec.KnownFields(true)
	err := dec.Decode(&v)
	key, line, ok := UnknownKey(err, n.Content[0], 1)
	if !ok || key != "colour" || line != 3 {
		t.Fatalf("UnknownKey = %q %d %v", key, line, ok)
	}
	if _, _, ok := UnknownKey(yaml.Unmarshal([]byte("a: [1"), &v), n.Content[0], 1); ok {
		t.Fatal("a syntax error read as an unknown key")
	}
}
