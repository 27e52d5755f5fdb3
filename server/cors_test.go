package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// corsServer serves the approval graph with API keys and the given
// allowed origins; it returns its URL and a key.
func corsServer(t *testing.T, origins []string) (string, string) {
	s := inmem.Open(store.Options{})
	ks, _ := store.KeysOf(s)
	key, _, err := server.NewKey(context.Background(), ks, "acme", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	srv, err := server.New(server.Config{Store: s, Keys: ks, AllowOrigins: origins, Assistants: []runs.Assistant{approvalGraph(t, &calls, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	return newHTTP(t, srv), key
}

func corsDo(t *testing.T, method, url, origin, key string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// TestCORSPreflight: a browser's preflight is answered on every route —
// 204 with the methods and the requested headers, without an API key —
// for an allowed origin, and refused (403, no Allow-Origin) for another.
func TestCORSPreflight(t *testing.T) {
	url, _ := corsServer(t, nil) // the default: loopback origins
	pre := map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,x-api-key"}
	for _, path := range []string{"/threads", "/threads/t1/runs/stream", "/threads/t1/runs/r1/cancel", "/assistants/search", "/store/items", "/checkpointer/put", "/no/such/route"} {
		for _, tc := range []struct {
			origin string
			want   int
		}{
			{"http://localhost:3000", 204},
			{"http://127.0.0.1:5173", 204},
			{"https://[::1]:8443", 204},
			{"https://evil.example.com", 403},
			{"http://localhost.evil.example.com:3000", 403},
		} {
			t.Run(tc.origin+path, func(t *testing.T) {
				res := corsDo(t, "OPTIONS", url+path, tc.origin, "", pre)
				allow := res.Header.Get("Access-Control-Allow-Origin")
				if res.StatusCode != tc.want || (tc.want == 204) != (allow == tc.origin) {
					t.Fatalf("%d, Allow-Origin %q", res.StatusCode, allow)
				}
				if tc.want == 204 && (res.Header.Get("Access-Control-Allow-Headers") != "content-type,x-api-key" || !strings.Contains(res.Header.Get("Access-Control-Allow-Methods"), "PATCH")) {
					t.Fatalf("preflight headers: %v", res.Header)
				}
			})
		}
	}
}

// TestCORSAnswers: every answer to an allowed origin — success or error —
// may be read by its page, with Content-Location (the run's id, which the
// SDK reads to cancel and rejoin) and the pagination headers exposed.
func TestCORSAnswers(t *testing.T) {
	url, key := corsServer(t, []string{"https://app.example.com", "http://localhost:*"})
	for _, tc := range []struct {
		name, method, path, origin, key string
		code                            int
		allowed                         bool
	}{
		{"listed", "GET", "/info", "https://app.example.com", key, 200, true},
		{"any port", "GET", "/ok", "http://localhost:9", "", 200, true},
		{"an error", "GET", "/threads/nope", "https://app.example.com", key, 404, true},
		{"no key", "GET", "/threads/nope", "https://app.example.com", "", 401, true},
		{"not listed", "GET", "/ok", "https://other.example.com", "", 200, false},
		{"another port of a listed origin", "GET", "/ok", "https://app.example.com:8443", "", 200, false},
		{"another scheme", "GET", "/ok", "http://app.example.com", "", 200, false},
		{"127.0.0.1 not listed", "GET", "/ok", "http://127.0.0.1:3000", "", 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := corsDo(t, tc.method, url+tc.path, tc.origin, tc.key, nil)
			got := res.Header.Get("Access-Control-Allow-Origin") == tc.origin
			exposed := res.Header.Get("Access-Control-Expose-Headers")
			if res.StatusCode != tc.code || got != tc.allowed || (tc.allowed && !strings.Contains(exposed, "Content-Location")) {
				t.Fatalf("%d, allowed %v, exposed %q", res.StatusCode, got, exposed)
			}
		})
	}
	open, _ := corsServer(t, []string{"*"})
	if res := corsDo(t, "GET", open+"/ok", "https://anything.example", "", nil); res.Header.Get("Access-Control-Allow-Origin") != "https://anything.example" {
		t.Fatalf("* allows any origin: %v", res.Header)
	}
	closed, _ := corsServer(t, []string{})
	if res := corsDo(t, "OPTIONS", closed+"/threads", "http://localhost:3000", "", map[string]string{"Access-Control-Request-Method": "GET"}); res.StatusCode != 403 {
		t.Fatalf("no origins allowed: preflight %d", res.StatusCode)
	}
}

// TestCORSConfig: a malformed allowed origin is a configuration error
// that names it.
func TestCORSConfig(t *testing.T) {
	for _, o := range []string{"localhost:3000", "ftp://x", "http://", "http://x/path", "http://x:port", "http://x:123456", "https://a b", "http://[%]:0", "http://exa_mple.com"} {
		t.Run(o, func(t *testing.T) {
			_, err := server.New(server.Config{Store: inmem.Open(store.Options{}), AllowOrigins: []string{"http://ok", o}})
			if !errors.Is(err, server.ErrOrigin) || !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), "2") {
				t.Fatalf("%v", err)
			}
		})
	}
}
