package redact_test

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/redact"
)

// streamSecrets are literal secrets (as an agent file's API key values
// give them) of the stream tests' redactor.
var streamSecrets = []string{"plainkeyvalue-0042", "hunter2hunter2", "ab12"}

// streamRedactor has the defaults, a key, a pattern and literal secrets.
func streamRedactor(t testing.TB) *redact.Redactor {
	t.Helper()
	r, err := redact.New(redact.Config{Keys: []string{"pin_code"}, Patterns: []string{`CUSTOM-[0-9]{6}`, `(?m)^ssn \d{3}$`, `\Bzz[0-9]{4}`}})
	if err != nil {
		t.Fatal(err)
	}
	return r.WithSecrets(streamSecrets...)
}

const pemKey = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1x\nQWERTYqwerty0987==\n-----END RSA PRIVATE KEY-----"

// streamCases are texts with a secret of every kind String hides, and the
// secrets that must never be shown.
var streamCases = []struct {
	name, text string
	secrets    []string
}{
	{"openai key", "Your key is sk-proj-abcdefghijklmnopqrstuvwxyz0123, keep it.", []string{"sk-proj-abcdefghijklmnopqrstuvwxyz0123", "abcdefghijklmnopqrstuvwxyz0123"}},
	{"key at the end", "use sk-abcdefghijklmnopqrstuvwx", []string{"abcdefghijklmnopqrstuvwx"}},
	{"bearer", "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc' x", []string{"eyJhbGciOiJIUzI1NiJ9"}},
	{"bearer lower case", "bearer abcdefgh123 then", []string{"abcdefgh123"}},
	{"aws", "id AKIAABCDEFGHIJKLMNOP in config", []string{"AKIAABCDEFGHIJKLMNOP", "ABCDEFGHIJKLMNOP"}},
	{"github", "ghp_" + strings.Repeat("a1", 18) + " and github_pat_" + strings.Repeat("B", 24), []string{strings.Repeat("a1", 18), strings.Repeat("B", 24)}},
	{"slack", "xoxb-1234567890-abcdef here", []string{"1234567890-abcdef"}},
	{"google", "AIza" + strings.Repeat("Q", 35) + ".", []string{strings.Repeat("Q", 35)}},
	{"pem", "key:\n" + pemKey + "\nend", []string{"MIIEpAIBAAKCAQEA1x", "QWERTYqwerty0987"}},
	{"url password", "dial postgres://app:s3cr3tpw@db:5432/x failed", []string{"s3cr3tpw"}},
	{"key=value", "dial: password=hunter2 host=db", []string{"hunter2"}},
	{"json text", `{"question":"q","token":"abcdef123","API-Key": 12}`, []string{"abcdef123"}},
	{"escaped json text", `{\"secret\":\"s3cr3tvalue\"}`, []string{"s3cr3tvalue"}},
	{"user key", "pin_code: 4242-9999-77; ok", []string{"4242-9999-77"}},
	{"user pattern", "code CUSTOM-123456 done", []string{"CUSTOM-123456", "123456"}},
	{"multiline pattern", "a\nssn 123\nb", []string{"ssn 123"}},
	{"no word boundary pattern", "xzz1234 zz9999", []string{"zz1234"}},
	{"literals", "env plainkeyvalue-0042 and hunter2hunter2hunter2 and ab12ab1", []string{"plainkeyvalue-0042", "hunter2hunter2", "ab12"}},
	{"literal prefixes that are not secrets", "plainkeyvalue-004 hunter2hunte ab1", nil},
	{"prose", "The quick brown fox jumps over the lazy dog. Tokens: 5, my_password=x, disk-usage-monitoring-service.", nil},
	{"shapes in words", "Task-abcdefghijklmnopqrstuvwx is a task, xsk-abcdefghijklmnopqrstuvwx too", nil},
	{"unicode", "Grüße — ключ sk-ÄÖÜabcdefghijklmnopqrstu ✓ password=pässwört ok", []string{"pässwört"}},
	{"invalid utf-8", "a\xffb sk-abcdefghijklmnop\xfeqrst\xe2\x82 token=\xe2\x82xx", []string{"\xe2\x82xx"}},
	{"secret after an open shape", "sk-abc then sk-abcdefghijklmnopqrstuvwx", []string{"abcdefghijklmnopqrstuvwx"}},
	{"nested", "password=sk-abcdefghijklmnopqrstuvwx;Bearer hunter2hunter2xyz", []string{"abcdefghijklmnopqrstuvwx", "hunter2hunter2"}},
}

// feedSplit streams text cut at cuts (increasing offsets), checking after
// each piece that what was released so far begins what String returns
// for the whole text, and returns the pieces released.
func feedSplit(t *testing.T, r *redact.Redactor, text string, cuts []int) []string {
	t.Helper()
	want := r.String(text)
	s := r.Stream()
	var out []string
	shown := ""
	prev := 0
	for _, c := range append(cuts, len(text)) {
		piece := s.Write(text[prev:c])
		prev = c
		out = append(out, piece)
		shown += piece
		if !strings.HasPrefix(want, shown) {
			t.Fatalf("after %q the stream released %q, which does not begin %q", text[:c], shown, want)
		}
		if s.Held() > redact.DefaultHoldLimit {
			t.Fatalf("holds %d bytes", s.Held())
		}
	}
	rest := s.Flush()
	out = append(out, rest)
	if shown += rest; shown != want {
		t.Fatalf("cut at %v: the stream released %q, String %q", cuts, shown, want)
	}
	return out
}

// noSecret fails when a secret is in any released piece, or in their
// concatenation.
func noSecret(t *testing.T, pieces []string, secrets []string) {
	t.Helper()
	all := strings.Join(pieces, "")
	for _, sec := range secrets {
		for _, p := range append(pieces, all) {
			if strings.Contains(p, sec) {
				t.Fatalf("secret %q released in %q (pieces %q)", sec, p, pieces)
			}
		}
	}
}

// TestStreamEveryCut cuts each text at every byte boundary, then in
// single bytes: what the stream releases is always a beginning of what
// String returns for the whole text, all of it in the end, and no piece
// holds a secret.
func TestStreamEveryCut(t *testing.T) {
	r := streamRedactor(t)
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.secrets != nil && r.String(tc.text) == tc.text {
				t.Fatalf("String hides nothing in %q", tc.text)
			}
			for i := 0; i <= len(tc.text); i++ {
				noSecret(t, feedSplit(t, r, tc.text, []int{i}), tc.secrets)
			}
			bytewise := make([]int, len(tc.text))
			for i := range bytewise {
				bytewise[i] = i
			}
			noSecret(t, feedSplit(t, r, tc.text, bytewise), tc.secrets)
		})
	}
}

// TestStreamReleasesProse: text that cannot begin a secret comes out as
// it goes in, piece by piece.
func TestStreamReleasesProse(t *testing.T) {
	s := streamRedactor(t).Stream()
	for _, piece := range []string{"The", " quick", " brown", " fox", " jumps", ".", " It", " is", " done", "."} {
		if got := s.Write(piece); got != piece {
			t.Fatalf("Write(%q) = %q, want it released at once", piece, got)
		}
	}
	if got := s.Flush(); got != "" {
		t.Fatalf("Flush = %q", got)
	}
}

// TestStreamHoldsOpenSecrets: a piece that may begin a secret is held
// until it cannot (then released as it is) or until the secret ends
// (then "[REDACTED]").
func TestStreamHoldsOpenSecrets(t *testing.T) {
	tests := []struct {
		name   string
		pieces []string
		want   []string
	}{
		{"a key", []string{"key ", "sk-", "abcdefgh", "ijklmnopqr", "st", " ok"}, []string{"key ", "", "", "", "", "[REDACTED] ok"}},
		{"not a key after all", []string{"see ", "sk-", "abc", " ok"}, []string{"see ", "", "", "sk-abc ok"}},
		{"a literal's prefix", []string{"env ", "hunter2", "hunter2", "!"}, []string{"env ", "", "", "[REDACTED]!"}},
		{"not the literal", []string{"env ", "hunter2", "hunt", "ing"}, []string{"env ", "", "", "hunter2hunting"}},
		{"a key's value until it ends", []string{"password", ": ", "hun", "ter2", ", next"}, []string{"password", ": ", "", "", "[REDACTED], next"}},
		{"a url's user is shown, its password held", []string{"postgres://ann", ":s3c", "r3t@db"}, []string{"postgres://ann", ":", "[REDACTED]@db"}},
	}
	r := streamRedactor(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := r.Stream()
			for i, p := range tc.pieces {
				if got := s.Write(p); got != tc.want[i] {
					t.Fatalf("Write(%q) = %q, want %q", p, got, tc.want[i])
				}
			}
			if got := s.Flush(); got != "" {
				t.Fatalf("Flush = %q", got)
			}
		})
	}
}

// TestStreamLimit: an open secret shape longer than the limit makes the
// stream release "[REDACTED]" and nothing more until the shape is
// settled; the rest is exact again, and nothing of the shape is shown.
func TestStreamLimit(t *testing.T) {
	r := streamRedactor(t)
	body := strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\n", 10)
	tests := []struct {
		name, text, want string
	}{
		{"a long private key", "x " + pemKey[:32] + "\n" + body + pemKey[len(pemKey)-29:] + " and then password=hunter2 y", "x [REDACTED]and then password=[REDACTED] y"},
		{"a key block that never ends", "x " + pemKey[:32] + "\n" + body + "tail", "x [REDACTED]"},
		{"a long api key", "x sk-" + strings.Repeat("a", 300) + " y", "x [REDACTED]y"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := r.StreamLimit(64)
			var got strings.Builder
			for i := 0; i < len(tc.text); i += 7 {
				got.WriteString(s.Write(tc.text[i:min(i+7, len(tc.text))]))
				if held := s.Held(); held > 64 && !strings.Contains(got.String(), redact.Replacement) {
					t.Fatalf("holds %d bytes and released %q", held, got.String())
				}
			}
			got.WriteString(s.Flush())
			if got.String() != tc.want {
				t.Fatalf("released %q, want %q", got.String(), tc.want)
			}
		})
	}
}

// TestStreamNothingToHide: a nil redactor, or one without expressions,
// releases pieces as they come.
func TestStreamNothingToHide(t *testing.T) {
	none, err := redact.New(redact.Config{NoDefaults: true})
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*redact.Redactor{"nil": nil, "no expressions": none} {
		s := r.Stream()
		if got := s.Write("sk-abcdefghijklmnopqrstuvwx"); got != "sk-abcdefghijklmnopqrstuvwx" || s.Flush() != "" {
			t.Fatalf("%s: Write = %q", name, got)
		}
	}
}

// TestStreamStartsOver: after Flush a stream redacts a new text.
func TestStreamStartsOver(t *testing.T) {
	s := streamRedactor(t).Stream()
	for range 2 {
		got := s.Write("a sk-abcdefghijklmnopqrstu") + s.Flush()
		if got != "a [REDACTED]" {
			t.Fatalf("got %q", got)
		}
	}
}
