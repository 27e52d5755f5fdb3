package store

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/store/driver"
)

// fieldPath is a parsed index field path: "$" (the whole value), or
// names separated by "." each followed by any number of [N] (N from the
// end when negative) or [*] (every element).
type fieldPath struct {
	raw   string
	steps []pathStep // none: the whole value
}

type pathStep struct {
	field string
	index int
	isIdx bool
	all   bool
}

var rootPath = fieldPath{raw: "$"}

// ParseFieldPath checks an index field path (see PutOp.Index).
func ParseFieldPath(s string) error {
	_, err := parseFieldPath(s)
	return err
}

func parseFieldPath(s string) (fieldPath, error) {
	if s == "$" {
		return rootPath, nil
	}
	p := fieldPath{raw: s}
	bad := func(why string) (fieldPath, error) {
		return fieldPath{}, fmt.Errorf("%w: field path %q: %s", ErrInvalidArgument, s, why)
	}
	if s == "" || !utf8.ValidString(s) {
		return bad("want a name such as text, meta.title or tags[*]")
	}
	for seg := range strings.SplitSeq(s, ".") {
		i := strings.IndexByte(seg, '[')
		if i < 0 {
			i = len(seg)
		}
		name, rest := seg[:i], seg[i:]
		if name == "" || strings.Contains(name, "]") {
			return bad("each part needs a name")
		}
		p.steps = append(p.steps, pathStep{field: name})
		for rest != "" {
			end := strings.IndexByte(rest, ']')
			if rest[0] != '[' || end < 0 {
				return bad("an index is [N], [-N] or [*]")
			}
			in := rest[1:end]
			rest = rest[end+1:]
			if in == "*" {
				p.steps = append(p.steps, pathStep{all: true})
				continue
			}
			n, err := strconv.Atoi(in)
			if err != nil {
				return bad("an index is [N], [-N] or [*]")
			}
			p.steps = append(p.steps, pathStep{index: n, isIdx: true})
		}
	}
	return p, nil
}

func parseFieldPaths(paths []string, what string) ([]fieldPath, error) {
	out := make([]fieldPath, 0, len(paths))
	for i, s := range paths {
		p, err := parseFieldPath(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", what, i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// texts returns the texts of the value at p (several for [*]), skipping
// what is missing.
func (p fieldPath) texts(v any) []string {
	var out []string
	walkPath(v, p.steps, func(x any) {
		if t := textOf(x); t != "" {
			out = append(out, t)
		}
	})
	return out
}

func walkPath(v any, steps []pathStep, visit func(any)) {
	if len(steps) == 0 {
		visit(v)
		return
	}
	st := steps[0]
	switch {
	case st.all:
		if l, ok := v.([]any); ok {
			for _, e := range l {
				walkPath(e, steps[1:], visit)
			}
		}
	case st.isIdx:
		if l, ok := v.([]any); ok {
			i := st.index
			if i < 0 {
				i += len(l)
			}
			if i >= 0 && i < len(l) {
				walkPath(l[i], steps[1:], visit)
			}
		}
	default:
		if m, ok := v.(map[string]any); ok {
			if x, ok := m[st.field]; ok {
				walkPath(x, steps[1:], visit)
			}
		}
	}
}

// textOf is the text of a JSON value: a string itself, a number or a
// boolean its JSON, an object or array the texts inside it (objects by
// key), one per line.
func textOf(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case map[string]any:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if t := textOf(x[k]); t != "" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, "\n")
	case []any:
		var parts []string
		for _, e := range x {
			if t := textOf(e); t != "" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, "\n")
	}
	return fmt.Sprint(v)
}

const (
	maxTermBytes      = 255
	maxIndexTextBytes = 256 << 10
	maxQueryTerms     = 64
)

// indexText is the Text of an item whose indexed texts are texts: their
// words, space-separated, up to 256 KiB.
func indexText(texts []string) string {
	var b strings.Builder
	for _, t := range texts {
		for _, w := range driver.Terms(t) {
			if b.Len()+len(w)+1 > maxIndexTextBytes {
				return b.String()
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(w)
		}
	}
	return b.String()
}

// queryTerms are the distinct words of a text query (at most 64).
func queryTerms(q string) []string {
	var out []string
	for _, w := range driver.Terms(q) {
		if !slices.Contains(out, w) && len(out) < maxQueryTerms {
			out = append(out, w)
		}
	}
	return out
}

// cosine is the cosine similarity of two vectors of one length (0 when
// either is all zeros).
func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}
