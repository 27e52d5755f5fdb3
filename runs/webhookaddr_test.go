package runs

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestPrivateAddr(t *testing.T) {
	for _, c := range []struct {
		addr    string
		private bool
	}{
		{"127.0.0.1", true}, {"::1", true}, {"10.0.0.1", true}, {"172.16.5.4", true}, {"192.168.1.1", true},
		{"169.254.169.254", true}, {"fe80::1", true}, {"fd12::1", true}, {"100.64.1.1", true}, {"0.0.0.0", true},
		{"::ffff:127.0.0.1", true}, {"224.0.0.1", true},
		{"8.8.8.8", false}, {"1.1.1.1", false}, {"2606:4700::1111", false}, {"100.128.0.1", false},
	} {
		if got := privateAddr(netip.MustParseAddr(c.addr)); got != c.private {
			t.Errorf("%s: private %v, want %v", c.addr, got, c.private)
		}
	}
}

// TestGuardedClientRefusesPrivate: the client that delivers webhooks
// refuses, when it connects, an address the webhook may not reach (a
// name that resolved to a public address when the run was made and to a
// private one now).
func TestGuardedClientRefusesPrivate(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer hs.Close()
	_, err := guardedClient().Post(hs.URL, "application/json", nil)
	if !errors.Is(err, errPrivateAddress) {
		t.Fatalf("a delivery to %s: %v", hs.URL, err)
	}
	if res, err := http.Post(hs.URL, "application/json", nil); err != nil {
		t.Fatalf("the receiver itself: %v", err)
	} else {
		res.Body.Close()
	}
}
