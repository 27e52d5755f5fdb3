package codesize

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestFunctionsReadAtOnce measures every function outside tests in the
// module.
func TestFunctionsReadAtOnce(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if fm := MeasureFile(fset, path, f); fm.Over() {
			t.Errorf("%s has %d lines (limit %d): split it by subject, or say why in a comment above the package clause on a line starting \"Long:\"",
				path, fm.Lines, MaxFileLines)
		}
		for _, fn := range Measure(fset, f) {
			n++
			if fn.Over() {
				t.Errorf("%s: %s has %d lines and complexity %d (limits %d and %d): split it, or say why in its doc comment on a line starting \"Long:\"",
					fn.Pos, fn.Name, fn.Lines, fn.Complexity, MaxLines, MaxComplexity)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("measured only %d functions: the walk missed the module", n)
	}
}

func TestMeasure(t *testing.T) {
	src := `package p

func short() {}

// Long: a table of cases that reads best in one place.
func explained(x int) int {
	if x > 0 && x < 10 || x == 20 {
		return 1
	}
	for i := range x {
		switch i {
		case 1, 2:
		default:
		}
	}
	return 0
}

func (s *T[K]) method() {}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	got := Measure(fset, f)
	want := []Func{
		{Name: "short", Lines: 1, Complexity: 1},
		{Name: "explained", Lines: 12, Complexity: 6, Reason: "a table of cases that reads best in one place."},
		{Name: "T.method", Lines: 1, Complexity: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d functions, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name || g.Lines != w.Lines || g.Complexity != w.Complexity || g.Reason != w.Reason {
			t.Errorf("function %d = %+v, want %+v", i, g, w)
		}
	}
	over := Func{Lines: MaxLines + 1}
	if !over.Over() {
		t.Error("a long function without a reason is not over")
	}
	over.Reason = "why"
	if over.Over() {
		t.Error("a long function with a reason is over")
	}
}

func TestMeasureFile(t *testing.T) {
	body := strings.Repeat("var _ = 1\n", MaxFileLines)
	tests := []struct {
		name, src  string
		over       bool
		wantReason string
	}{
		{"short", "package p\n", false, ""},
		{"long", "package p\n" + body, true, ""},
		{"long with a reason", "// Long: a generated table.\n\n// Package p is p.\npackage p\n" + body, false, "a generated table."},
		{"a reason in the package doc does not count", "// Package p is p.\n//\n// Long: no.\npackage p\n" + body, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "p.go", tc.src, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			got := MeasureFile(fset, "p.go", f)
			if got.Over() != tc.over || got.Reason != tc.wantReason {
				t.Fatalf("%+v: over %v, want %v (reason %q)", got, got.Over(), tc.over, tc.wantReason)
			}
		})
	}
}
