package redact_test

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/redact"
)

// cutsOf turns fuzz bytes into increasing cut offsets in a text of n
// bytes: each byte is the length of the next piece (0 to 15).
func cutsOf(spec []byte, n int) []int {
	var cuts []int
	at := 0
	for _, b := range spec {
		at += int(b % 16)
		if at > n {
			break
		}
		cuts = append(cuts, at)
	}
	return cuts
}

// stretchReplaced reports whether got is want with stretches replaced by
// "[REDACTED]" (or want itself).
func stretchReplaced(want, got string) bool {
	memo := map[[2]int]bool{}
	var from func(i, j int) bool // got[i:] can come from want[j:]
	from = func(i, j int) bool {
		if i == len(got) {
			return j == len(want)
		}
		k := [2]int{i, j}
		if v, ok := memo[k]; ok {
			return v
		}
		ok := j < len(want) && got[i] == want[j] && from(i+1, j+1)
		if !ok && strings.HasPrefix(got[i:], redact.Replacement) {
			for e := j; e <= len(want) && !ok; e++ {
				ok = from(i+len(redact.Replacement), e)
			}
		}
		memo[k] = ok
		return ok
	}
	return from(0, 0)
}

// streamOf streams text cut at cuts through a stream with the given hold
// limit, checking the hold limit after each piece, and returns what it
// released.
func streamOf(t *testing.T, r *redact.Redactor, text string, cuts []int, limit int) string {
	t.Helper()
	s := r.StreamLimit(limit)
	var b strings.Builder
	prev := 0
	for _, c := range append(cuts, len(text)) {
		b.WriteString(s.Write(text[prev:c]))
		prev = c
		if s.Held() > limit && !strings.Contains(b.String(), redact.Replacement) {
			t.Fatalf("holds %d bytes (limit %d) and released %q", s.Held(), limit, b.String())
		}
	}
	b.WriteString(s.Flush())
	return b.String()
}

// FuzzStream streams texts cut at random places: the output is String's
// for the whole text (with the default limit), or String's with
// stretches redacted (with a small limit), and a beginning of it at every
// step.
func FuzzStream(f *testing.F) {
	for _, tc := range streamCases {
		f.Add(tc.text, []byte{1, 2, 3, 5, 8, 13}, uint16(0))
		f.Add(tc.text, []byte{7, 0, 4, 9, 1, 1, 1, 15, 2}, uint16(24))
	}
	f.Add("key "+pemKey+" password=hunter2 y", []byte{3, 3, 3}, uint16(16))
	r := streamRedactor(f)
	f.Fuzz(func(t *testing.T, text string, spec []byte, small uint16) {
		cuts := cutsOf(spec, len(text))
		want := r.String(text)
		if small == 0 {
			feedSplit(t, r, text, cuts)
			return
		}
		limit := int(small%256) + 1
		if got := streamOf(t, r, text, cuts, limit); !stretchReplaced(want, got) {
			t.Fatalf("limit %d, cut at %v: released %q, String %q", limit, cuts, got, want)
		}
	})
}

// streamPatterns exercise the stream's regular expression machine:
// assertions at both ends, alternations whose order decides the match,
// lazy and greedy repeats, case folding, Unicode classes, and
// expressions that match the empty string at some places.
var streamPatterns = []string{
	`\bfoo\b`, `(?i)k+e+y`, `a|ab|abc`, `abc|ab|a`, `(?m)^x.*$`, `\Bq`, `^start`, `end$`, `\Aat\z`,
	`[[:upper:]]{3,}`, `(?s)<<.*?>>`, `(?s)<<.*>>`, `\pL+\d`, `x*y`, `\b`, `\bx?`, `(?i)straße`, `ſ+`,
	`(a+)(b*)`, `\d{2,4}?-`, `(?U)q+`, `[^\n]{5}\n`,
}

// FuzzStreamMachine compares the stream with String for single
// expressions of every kind, cut at random places: the stream's machine
// finds what package regexp finds.
func FuzzStreamMachine(f *testing.F) {
	texts := []string{"foo food afoo foo.", "KEY kkeeyy Key", "abcabab a", "x1\nx2\ny x\n", "aqq qq", "start startend end",
		"at", "ABCdef GHIJ", "<<a>> <<b\n>>>", "héllo9 wörld2", "xxy y xy", "a b", "Straße STRASSE", "ſſs", "aab abbb b",
		"12-1234-12345-", "qqq", "12345\n123\n", "", "\xff\xfe\xe2\x82"}
	for i := range streamPatterns {
		for j, text := range texts {
			f.Add(uint8(i), text, []byte{uint8(j), 1, 2, 3})
		}
	}
	redactors := make([]*redact.Redactor, len(streamPatterns))
	for i, p := range streamPatterns {
		r, err := redact.New(redact.Config{NoDefaults: true, Patterns: []string{p}})
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		redactors[i] = r
	}
	f.Fuzz(func(t *testing.T, which uint8, text string, spec []byte) {
		r := redactors[int(which)%len(redactors)]
		feedSplit(t, r, text, cutsOf(spec, len(text)))
	})
}

// TestStreamMachineEveryCut runs FuzzStreamMachine's seeds cut at every
// byte boundary.
func TestStreamMachineEveryCut(t *testing.T) {
	texts := []string{"foo food afoo foo. KEY kkeeyy abcabab x1\nx2\ny aqq start startend end ABCdef <<a>> <<b\n>>> héllo9 xxy Straße ſſs aab 12-1234- qqq 12345\n",
		"at", "end", "\xff\xfex\xe2\x82"}
	for _, p := range streamPatterns {
		r, err := redact.New(redact.Config{NoDefaults: true, Patterns: []string{p}})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, text := range texts {
			for i := 0; i <= len(text); i++ {
				feedSplit(t, r, text, []int{i})
			}
		}
	}
}
