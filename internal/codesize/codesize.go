package codesize

import (
	"go/ast"
	"go/token"
	"strings"
)

// The limits.
const (
	MaxLines      = 80
	MaxComplexity = 25
	// MaxFileLines bounds a file outside tests: a file is one subject,
	// read in one sitting.
	MaxFileLines = 600
)

// File is one file's measure.
type File struct {
	Path  string
	Lines int
	// Reason is the text after "Long:" in a comment above the package
	// clause (not the package doc), if any.
	Reason string
}

// Over reports whether f exceeds MaxFileLines without a reason.
func (f File) Over() bool { return f.Reason == "" && f.Lines > MaxFileLines }

// MeasureFile returns the measure of file, parsed with comments from
// path.
func MeasureFile(fset *token.FileSet, path string, file *ast.File) File {
	out := File{Path: path, Lines: fset.File(file.Pos()).LineCount()}
	for _, cg := range file.Comments {
		if cg.Pos() >= file.Package {
			break
		}
		if cg == file.Doc {
			continue
		}
		if r := reason(cg); r != "" {
			out.Reason = r
		}
	}
	return out
}

// Func is one function's measure.
type Func struct {
	Name       string
	Pos        token.Position
	Lines      int
	Complexity int
	// Reason is the text after "Long:" in the doc comment, if any.
	Reason string
}

// Over reports whether f exceeds a limit without a reason.
func (f Func) Over() bool {
	return f.Reason == "" && (f.Lines > MaxLines || f.Complexity > MaxComplexity)
}

// Measure returns the measures of the functions declared in file (function
// literals count toward the function that holds them).
func Measure(fset *token.FileSet, file *ast.File) []Func {
	var out []Func
	for _, d := range file.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		out = append(out, Func{
			Name:       funcName(fn),
			Pos:        fset.Position(fn.Pos()),
			Lines:      fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1,
			Complexity: Complexity(fn.Body),
			Reason:     reason(fn.Doc),
		})
	}
	return out
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if ix, ok := t.(*ast.IndexListExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// Complexity is the cyclomatic complexity of a body: one, plus one per
// if, for, range, non-default case or select clause, && and ||.
func Complexity(body ast.Node) int {
	c := 1
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

func reason(doc *ast.CommentGroup) string {
	if doc == nil {
		return ""
	}
	for _, line := range strings.Split(doc.Text(), "\n") {
		if r, ok := strings.CutPrefix(strings.TrimSpace(line), "Long:"); ok {
			return strings.TrimSpace(r)
		}
	}
	return ""
}
