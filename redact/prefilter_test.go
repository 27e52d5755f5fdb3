package redact

import (
	"fmt"
	"strings"
	"testing"
)

// prefilterRedactors are redactors whose prefilter FuzzPrefilter checks:
// the defaults, literals and extra keys, and a pattern with a literal
// prefix.
func prefilterRedactors(tb testing.TB) []*Redactor {
	extra, err := New(Config{Keys: []string{"ssn", "Session-ID"}, Patterns: []string{`acct-[0-9]{6}`}})
	if err != nil {
		tb.Fatal(err)
	}
	return []*Redactor{Default(), Default().WithSecrets("Literal-Secret-42"), extra.WithSecrets("zq9!x")}
}

// FuzzPrefilter: String with its prefilter says exactly what the
// expressions alone say, for any text.
func FuzzPrefilter(f *testing.F) {
	for _, s := range []string{"hello, how are you today?", "password=x", "PassWord: y", "pass_word=z", "my-TOKEN=abc", "BEARER abcdefghijk",
		"Bearer\tabcdefghijk", "sK-aaaaaaaaaaaaaaaaaaaa", "AKIAABCDEFGHIJKLMNOP", "ghp_" + strings.Repeat("a", 22), "xoxb-1234567890",
		"-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----", "postgres://u:p@h/db", "api-key: v", "x-api-key=1",
		"to\u212Aen=abc", "ſecret: a", "literal-secret-42 here", "acct-123456", "ssn: 078-05-1120", "sessionid=1", "zq9!x"} {
		f.Add(s)
	}
	rs := prefilterRedactors(f)
	f.Fuzz(func(t *testing.T, in string) {
		for i, r := range rs {
			if got, want := r.String(in), r.stringSlow(in); got != want {
				t.Fatalf("redactor %d: %q: with prefilter %q, without %q", i, in, got, want)
			}
		}
	})
}

// FuzzPrefilterJSON: JSON with its prefilter gives what it gives
// without, for any bytes.
func FuzzPrefilterJSON(f *testing.F) {
	for _, s := range []string{`{"messages":[{"content":"hello","type":"human"}]}`, `{"password":"x"}`, `{"pass_word":"x"}`, `{"a":"\u0073k-aaaaaaaaaaaaaaaaaaaa"}`,
		`["Bearer abcdefghij"]`, `{"k":"to\u212Aen=1"}`, `{"u":"postgres://a:b@h"}`, `{"x":"Literal-Secret-42"}`, `not json sk-aaaaaaaaaaaaaaaaaaaa`,
		`{"a":"acct-123456"}`, `{"SSN":1}`, `{"s":"zq9!x"}`, `{"a":"\"zq9!x"}`} {
		f.Add([]byte(s))
	}
	rs := prefilterRedactors(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		for i, r := range rs {
			if got, want := r.JSON(in), r.jsonSlow(in); string(got) != string(want) {
				t.Fatalf("redactor %d: %q: with prefilter %q, without %q", i, in, got, want)
			}
		}
	})
}

func TestPrefilterOff(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		off     bool
	}{
		{"literal prefix", `acct-[0-9]+`, false},
		{"no prefix", `[0-9]{3}-[0-9]{2}`, true},
		{"case folded", `(?i)acct-[0-9]+`, true},
		{"alternation", `foo|bar`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(Config{Patterns: []string{tc.pattern}})
			if err != nil {
				t.Fatal(err)
			}
			if r.pre.off != tc.off {
				t.Fatalf("prefilter off = %v, want %v", r.pre.off, tc.off)
			}
		})
	}
}

// BenchmarkStringChat: redacting ordinary chat text, with and without
// the prefilter.
func BenchmarkStringChat(b *testing.B) {
	r := Default()
	s := "You said: turn 12: hello, how are you today?. " + strings.Repeat("x", 150)
	b.Run("prefilter", func(b *testing.B) {
		for b.Loop() {
			_ = r.String(s)
		}
	})
	b.Run("expressions", func(b *testing.B) {
		for b.Loop() {
			_ = r.stringSlow(s)
		}
	})
}

// BenchmarkJSONChatState: the prefilter over a chat state's JSON (a
// thousand messages), which needs no redaction.
func BenchmarkJSONChatState(b *testing.B) {
	r := Default()
	var sb strings.Builder
	sb.WriteString(`{"messages":[`)
	for i := range 1000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"content":"You said: turn %d: hello, how are you today?. %s","id":"m-%d","type":"ai"}`, i, strings.Repeat("x", 150), i)
	}
	sb.WriteString(`]}`)
	doc := []byte(sb.String())
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if out := r.JSON(doc); len(out) != len(doc) {
			b.Fatal("redacted")
		}
	}
}
