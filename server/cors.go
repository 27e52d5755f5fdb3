package server

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Cross-origin requests. A browser front end (agent-chat-ui, a page on
// useStream) that calls the server's URL from another origin sends a
// preflight OPTIONS first, then requests with an Origin header; the
// server answers both for the origins it allows.

// LoopbackOrigins is the default of Config.AllowOrigins: pages served
// from this machine on any port (http or https, localhost, 127.0.0.1 or
// [::1]), where a front end under development runs.
func LoopbackOrigins() []string {
	return []string{"http://localhost:*", "https://localhost:*", "http://127.0.0.1:*", "https://127.0.0.1:*", "http://[::1]:*", "https://[::1]:*"}
}

// corsExposed are the answer headers a page may read: the SDK reads a
// run's id from Content-Location to cancel and rejoin it.
const corsExposed = "Content-Location, Location, X-Pagination-Total, X-Pagination-Next, Server-Timing"

const corsMethods = "GET, POST, PUT, PATCH, DELETE, OPTIONS"

// ErrOrigin: an allowed origin is malformed.
var ErrOrigin = fmt.Errorf("%w: allowed origin", ErrConfig)

// originRule is one allowed origin: any ("*"), or a scheme and host with
// a port or any port.
type originRule struct {
	any          bool
	scheme, host string
	port         string // "" for the scheme's default, "*" for any
}

// parseOrigins checks the allowed origins: "*", or scheme://host[:port]
// with scheme http or https and port a number or "*".
func parseOrigins(list []string) ([]originRule, error) {
	rules := make([]originRule, 0, len(list))
	for i, o := range list {
		r, err := parseOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("%w %d %q: %v", ErrOrigin, i+1, o, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func parseOrigin(o string) (originRule, error) {
	if o == "*" {
		return originRule{any: true}, nil
	}
	scheme, rest, ok := strings.Cut(o, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return originRule{}, fmt.Errorf("want *, or http:// or https:// then a host")
	}
	if rest == "" || strings.ContainsAny(rest, "/?#@ ") {
		return originRule{}, fmt.Errorf("want scheme://host[:port], without a path")
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		host, port = rest, ""
	}
	host = strings.Trim(host, "[]")
	if !validHost(host) {
		return originRule{}, fmt.Errorf("host %q: want a name of letters, digits, '-' and '.', or an IP address", host)
	}
	r := originRule{scheme: scheme, host: strings.ToLower(host), port: port}
	if port != "" && port != "*" && !isPort(port) {
		return originRule{}, fmt.Errorf("port %q: want a number or *", port)
	}
	return r, nil
}

func validHost(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for _, c := range h {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isPort(p string) bool {
	if len(p) == 0 || len(p) > 5 {
		return false
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// allows reports whether a request's Origin header is allowed.
func (r originRule) allows(origin string) bool {
	if r.any {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != r.scheme || strings.ToLower(u.Hostname()) != r.host || u.Path != "" {
		return false
	}
	return r.port == "*" || u.Port() == r.port
}

// corsAllowed reports whether origin may call the server.
func (s *Server) corsAllowed(origin string) bool {
	for _, r := range s.origins {
		if r.allows(origin) {
			return true
		}
	}
	return false
}

// cors answers a preflight (true: answered) and marks an answer to an
// allowed origin as readable by it. A preflight needs no API key: it
// carries none, and says only what the server allows.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	h := w.Header()
	h.Add("Vary", "Origin")
	if !s.corsAllowed(origin) {
		if preflight {
			s.writeError(w, r, &apiError{Status: http.StatusForbidden, Msg: fmt.Sprintf("origin %q is not allowed (cairn serve --cors)", origin)})
		}
		return preflight
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", corsExposed)
	if !preflight {
		return false
	}
	h.Set("Access-Control-Allow-Methods", corsMethods)
	if rh := r.Header.Get("Access-Control-Request-Headers"); rh != "" {
		h.Set("Access-Control-Allow-Headers", rh)
	}
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// CheckOrigins checks allowed origins as Config.AllowOrigins takes them
// (ErrOrigin names the first bad one).
func CheckOrigins(list []string) error {
	_, err := parseOrigins(list)
	return err
}
