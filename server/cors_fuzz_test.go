package server

import (
	"net"
	"strings"
	"testing"
)

// FuzzParseOrigin: an allowed origin either parses or is refused, never
// panics; a parsed origin with a port number allows exactly itself, and a
// rule never allows an origin of another scheme.
func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{"*", "http://localhost:*", "https://app.example.com", "http://[::1]:8080", "http://127.0.0.1:3000", "ftp://x", "http://", "http://x/y", "http://x:99999", "https://a b", "http://[::1", "HTTP://X"} {
		f.Add(s, "http://localhost:3000")
	}
	f.Fuzz(func(t *testing.T, rule, origin string) {
		r, err := parseOrigin(rule)
		if err != nil || r.any {
			return
		}
		if r.port != "" && r.port != "*" {
			self := r.scheme + "://" + net.JoinHostPort(r.host, r.port)
			if !r.allows(self) {
				t.Fatalf("rule %q does not allow its own origin %q", rule, self)
			}
		}
		if r.allows(origin) && !strings.HasPrefix(origin, r.scheme+"://") {
			t.Fatalf("rule %q allows %q of another scheme", rule, origin)
		}
	})
}
