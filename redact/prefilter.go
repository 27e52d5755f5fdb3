package redact

import (
	"bytes"
	"regexp"
	"strings"
)

// A prefilter tells, in one pass over a string, that no secret shape,
// literal secret or secret key can occur in it, so that String skips its
// regular expressions (the costly part of redacting a large state). It
// only ever answers "nothing here" when the expressions would find
// nothing: every expression has a literal the text must hold for it to
// match, compared ignoring ASCII case; a pattern without one, or text
// with a byte outside ASCII (where case folding is Unicode's), turns the
// prefilter off for that text.
type prefilter struct {
	// off: some pattern has no literal every match holds.
	off bool
	// rawOff: some literal holds a character JSON text escapes, so JSON
	// text must be decoded before it is looked at.
	rawOff bool
	// shapes: lower-case literals one of which every shape or literal
	// secret holds; keys: secret key names as normKey writes them, one
	// of which every key=value match holds once '-' and '_' are dropped;
	// both by their first byte.
	shapes, keys [256][]string
	// shapePair and keyPair gate the comparisons: the first two bytes of
	// a shape, the first two letters of a key (single bytes: always).
	shapePair, keyPair *[256][256]bool
	// class says of each byte (either case) whether it starts a shape
	// (classShape) or a key (classKey), or is not ASCII (classOther);
	// pairClass the same of each two bytes as they are written (a key's
	// first letter before a separator: classKey, the letter after decides).
	class     [256]uint8
	pairClass *[1 << 16]uint8
}

// Byte classes of a prefilter.
const (
	classShape = 1 << iota
	classKey
	classOther
)

// lowerTable folds ASCII upper case to lower case.
var lowerTable = func() (t [256]byte) {
	for i := range t {
		t[i] = lower(byte(i))
	}
	return t
}()

// shapeLiterals are literals that the default patterns' matches hold, in
// the order of defaultPatterns (the PEM block's "begin " is what its
// match always holds, ignoring case).
var shapeLiterals = [][]string{
	{"sk-"},
	{"bearer"},
	{"akia", "asia"},
	{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"},
	{"github_pat_"},
	{"xox"},
	{"aiza"},
	{"-----begin "},
}

// newPrefilter builds the prefilter of a redactor's expressions.
func newPrefilter(patterns, literals []string, keys map[string]bool) *prefilter {
	p := &prefilter{}
	var shapes []string
	for _, l := range literals {
		shapes = append(shapes, strings.ToLower(l))
	}
	for i, src := range patterns {
		if i < len(defaultPatterns) && src == defaultPatterns[i] {
			shapes = append(shapes, shapeLiterals[i]...)
			continue
		}
		re, err := regexp.Compile(src)
		prefix := ""
		if err == nil {
			prefix, _ = re.LiteralPrefix()
		}
		if prefix == "" || !ascii(prefix) {
			p.off = true
			return p
		}
		shapes = append(shapes, strings.ToLower(prefix))
	}
	p.shapePair, p.keyPair = new([256][256]bool), new([256][256]bool)
	for _, l := range shapes {
		p.shapes[l[0]] = append(p.shapes[l[0]], l)
		setPair(p.shapePair, l)
		p.rawOff = p.rawOff || strings.ContainsAny(l, "\"\\<>&") || !ascii(l) || strings.IndexFunc(l, func(r rune) bool { return r < 0x20 }) >= 0
	}
	for k := range keys {
		p.keys[k[0]] = append(p.keys[k[0]], k)
		setPair(p.keyPair, k)
	}
	p.classify()
	return p
}

// classify fills class and pairClass.
func (p *prefilter) classify() {
	for c := range p.class {
		l := lowerTable[c]
		switch {
		case c >= 0x80:
			p.class[c] = classOther
		default:
			if p.shapes[l] != nil {
				p.class[c] |= classShape
			}
			if p.keys[l] != nil {
				p.class[c] |= classKey
			}
		}
	}
	p.pairClass = new([1 << 16]uint8)
	for a := range 256 {
		for b := range 256 {
			cls, la, lb := p.class[a], lowerTable[a], lowerTable[b]
			if cls == classOther || b >= 0x80 {
				p.pairClass[a<<8|b] = classOther
				continue
			}
			var pc uint8
			if cls&classShape != 0 && p.shapePair[la][lb] {
				pc |= classShape
			}
			if cls&classKey != 0 && (p.keyPair[la][lb] || b == '-' || b == '_') {
				pc |= classKey
			}
			p.pairClass[a<<8|b] = pc
		}
	}
}

// setPair marks lit's first two bytes (every second byte when lit has
// one byte: it always goes on to the comparison).
func setPair(t *[256][256]bool, lit string) {
	if len(lit) == 1 {
		for c := range t[lit[0]] {
			t[lit[0]][c] = true
		}
		return
	}
	t[lit[0]][lit[1]] = true
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// quiet reports that the redactor's expressions find nothing in s.
func (p *prefilter) quiet(s string) bool {
	if p == nil || p.off {
		return false
	}
	return quietText(p, s)
}

// quietJSON reports that nothing in JSON text b is redacted: no member
// name is a secret key and no string holds a secret. Its strings are
// read as they are written, which holds what they decode to as long as
// no escape writes a character of a secret (\uXXXX does: such text is
// not quiet) and no literal secret holds a character JSON escapes.
func (p *prefilter) quietJSON(b []byte) bool {
	if p == nil || p.off || p.rawOff || bytes.Contains(b, []byte(`\u`)) || bytes.Contains(b, []byte("://")) {
		return false
	}
	return quietText(p, b)
}

// quietText is the one pass of quiet and quietJSON: at each byte that
// starts a shape or a key with the byte after it, the comparisons.
func quietText[T string | []byte](p *prefilter, s T) bool {
	n := len(s)
	if n == 0 {
		return true
	}
	for i := 0; i+1 < n; i++ {
		if pc := p.pairClass[uint16(s[i])<<8|uint16(s[i+1])]; pc != 0 && !quietAt(p, s, i, pc) {
			return false
		}
	}
	last := n - 1 // a byte with none after it
	return p.class[s[last]] == 0 || quietAt(p, s, last, p.class[s[last]])
}

// quietAt reports that no shape and no key starts at s[i], where the
// bytes are of class cls.
func quietAt[T string | []byte](p *prefilter, s T, i int, cls uint8) bool {
	if cls&classOther != 0 {
		return false
	}
	c := lowerTable[s[i]]
	var next byte // the byte after, 0 at the end
	if i+1 < len(s) {
		next = lowerTable[s[i+1]]
	}
	if cls&classShape != 0 && p.shapePair[c][next] && hasFoldAt(s, i, p.shapes[c]) {
		return false
	}
	return cls&classKey == 0 || !p.keyPair[c][nextLetter(s, i+1)] || !keyAt(s, i, p.keys[c])
}

// nextLetter is the first byte at or after i that is not '-' or '_',
// folded (0 at the end).
func nextLetter[T string | []byte](s T, i int) byte {
	for ; i < len(s); i++ {
		if c := s[i]; c != '-' && c != '_' {
			return lowerTable[c]
		}
	}
	return 0
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// hasFoldAt reports whether one of lits (lower case) starts at s[i],
// ignoring ASCII case.
func hasFoldAt[T string | []byte](s T, i int, lits []string) bool {
	for _, l := range lits {
		if len(s)-i >= len(l) && foldEq(s[i:i+len(l)], l) {
			return true
		}
	}
	return false
}

func foldEq[T string | []byte](s T, lowerLit string) bool {
	for j := 0; j < len(s); j++ {
		if lower(s[j]) != lowerLit[j] {
			return false
		}
	}
	return true
}

// keyAt reports whether one of keys (normalized) starts at s[i], ignoring
// ASCII case and any '-' or '_' after its first letter.
func keyAt[T string | []byte](s T, i int, keys []string) bool {
	for _, k := range keys {
		j, n := i, 0
		for j < len(s) && n < len(k) {
			c := lower(s[j])
			j++
			if n > 0 && (c == '-' || c == '_') {
				continue
			}
			if c != k[n] {
				break
			}
			n++
		}
		if n == len(k) {
			return true
		}
	}
	return false
}
