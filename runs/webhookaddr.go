package runs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// errPrivateAddress: a webhook's address is on this machine or a private
// network, which Config.WebhookPrivate does not allow.
var errPrivateAddress = errors.New("runs: a webhook to a loopback, private or link-local address")

// cgnat is carrier-grade NAT's shared address space (RFC 6598).
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// privateAddr reports whether an address is the machine's own or a
// private network's: loopback, RFC 1918 and unique-local, link-local,
// carrier-grade NAT, unspecified or multicast.
func privateAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() || a.IsMulticast() || cgnat.Contains(a)
}

// checkWebhookHost refuses a webhook whose host is, or resolves to, a
// private address (see privateAddr), unless Config.WebhookPrivate allows
// them or it is the serving program's own route (Config.BaseURL).
func (s *Service) checkWebhookHost(ctx context.Context, u *url.URL) error {
	if s.cfg.WebhookPrivate || s.selfRoute(u) {
		return nil
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		if privateAddr(a) {
			return fmt.Errorf("%w: %s (a receiver on this machine or network needs cairn serve --webhook-private)", errPrivateAddress, host)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("host %q does not resolve: %v", host, err)
	}
	for _, a := range addrs {
		if privateAddr(a) {
			return fmt.Errorf("%w: %s is %s (a receiver on this machine or network needs cairn serve --webhook-private)", errPrivateAddress, host, a)
		}
	}
	return nil
}

// selfRoute reports whether a webhook goes to the serving program's own
// address (Config.BaseURL), which its operator named.
func (s *Service) selfRoute(u *url.URL) bool {
	b := s.cfg.BaseURL
	return b != nil && u.Scheme == b.Scheme && u.Host == b.Host
}

// webhookClient is the client that delivers a webhook to u: the
// configured one, else one that refuses, when it connects, an address
// the webhook may not reach — a name that resolved to a public address
// when the run was made may resolve to a private one now.
func (s *Service) webhookClient(u *url.URL) *http.Client {
	switch {
	case s.cfg.HTTPClient != nil:
		return s.cfg.HTTPClient
	case s.cfg.WebhookPrivate || s.selfRoute(u):
		return http.DefaultClient
	}
	return s.guarded
}

// guardedClient is an HTTP client whose connections to private addresses
// are refused.
func guardedClient() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || privateAddr(ap.Addr()) {
			return fmt.Errorf("%w: %s", errPrivateAddress, address)
		}
		return nil
	}}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = d.DialContext
	tr.Proxy = nil // a proxy would reach what the dialer refuses
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
