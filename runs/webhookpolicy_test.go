package runs

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestParseWebhookPolicy(t *testing.T) {
	env := map[string]string{"LG_WEBHOOK_TOKEN": "s3cret-token", "HOME": "/root", "MY_KEY": "k"}
	getenv := func(k string) string { return env[k] }
	good := `{"url": {"require_https": true, "allowed_domains": ["hooks.example.com", "*.corp.example"], "allowed_ports": [443, 8443], "max_url_length": 100},
		"headers": {"Authorization": "Bearer ${{ env.LG_WEBHOOK_TOKEN }}", "X-Plain": "v"}}`
	p, err := ParseWebhookPolicy([]byte(good), getenv)
	if err != nil || p.Headers["Authorization"] != "Bearer s3cret-token" || p.Headers["X-Plain"] != "v" || !p.RequireHTTPS || len(p.AllowedDomains) != 2 {
		t.Fatalf("%+v %v", p, err)
	}
	if p, err := ParseWebhookPolicy([]byte(`{"payload_fields": ["run_id", "status", "error"]}`), getenv); err != nil || strings.Join(p.PayloadFields, ",") != "run_id,status,error" {
		t.Fatalf("payload_fields: %+v %v", p, err)
	}
	if p, err := ParseWebhookPolicy([]byte(`{"payload_fields": null}`), getenv); err != nil || p.PayloadFields != nil {
		t.Fatalf("payload_fields null: %+v %v", p, err)
	}
	if p, err := ParseWebhookPolicy([]byte(`{"env_prefix": "MY_", "headers": {"K": "${{env.MY_KEY}}"}}`), getenv); err != nil || p.Headers["K"] != "k" {
		t.Fatalf("env_prefix: %+v %v", p, err)
	}
	for _, c := range []struct{ name, in, where string }{
		{"not JSON", `{`, "$"},
		{"unknown key", `{"urls": {}}`, "$"},
		{"unknown url key", `{"url": {"allowed_hosts": []}}`, "$"},
		{"a bad domain", `{"url": {"allowed_domains": ["https://x.example"]}}`, "$.url.allowed_domains[0]"},
		{"a bare wildcard", `{"url": {"allowed_domains": ["*."]}}`, "$.url.allowed_domains[0]"},
		{"a bad port", `{"url": {"allowed_ports": [0]}}`, "$.url.allowed_ports[0]"},
		{"a negative length", `{"url": {"max_url_length": -1}}`, "$.url.max_url_length"},
		{"a variable past the prefix", `{"headers": {"X": "${{ env.HOME }}"}}`, "$.headers.X"},
		{"an unset variable", `{"headers": {"X": "${{ env.LG_WEBHOOK_NOPE }}"}}`, "$.headers.X"},
		{"a bad header name", `{"headers": {"X Y": "v"}}`, "$.headers.X Y"},
		{"a line break", `{"headers": {"X": "a\nb"}}`, "$.headers.X"},
		{"an unknown payload field", `{"payload_fields": ["run_id", "secrets"]}`, "$.payload_fields[1]"},
		{"a payload field twice", `{"payload_fields": ["values", "values"]}`, "$.payload_fields[1]"},
		{"no payload fields", `{"payload_fields": []}`, "$.payload_fields"},
		{"payload fields not a list", `{"payload_fields": "values"}`, "$"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseWebhookPolicy([]byte(c.in), getenv)
			var e *Error
			if !errors.As(err, &e) || e.Path != c.where {
				t.Fatalf("%v, want an error at %s", err, c.where)
			}
			if strings.Contains(err.Error(), "/root") {
				t.Fatalf("the error shows a variable's value: %v", err)
			}
		})
	}
}

func TestWebhookPolicyCheck(t *testing.T) {
	p := WebhookPolicy{RequireHTTPS: true, AllowedDomains: []string{"hooks.example.com", "*.corp.example"}, AllowedPorts: []int{443}, MaxURLLength: 60}
	for _, c := range []struct {
		url  string
		path bool
		ok   bool
	}{
		{"https://hooks.example.com/h", false, true},
		{"https://a.corp.example/h", false, true},
		{"https://a.b.corp.example/h", false, true},
		{"https://corp.example/h", false, false},
		{"https://evilhooks.example.com/h", false, false},
		{"http://hooks.example.com/h", false, false},
		{"https://hooks.example.com:8443/h", false, false},
		{"https://hooks.example.com/" + strings.Repeat("x", 60), false, false},
		{"/custom/hook", true, true},
	} {
		u, _ := url.Parse(c.url)
		if err := p.check(c.url, u, c.path); (err == nil) != c.ok {
			t.Errorf("%s: %v, want allowed %v", c.url, err, c.ok)
		}
	}
	p.DisableLoopback = true
	if err := p.check("/custom/hook", &url.URL{Path: "/custom/hook"}, true); err == nil {
		t.Error("a path with disable_loopback was allowed")
	}
}

func FuzzParseWebhookPolicy(f *testing.F) {
	f.Add([]byte(`{"url": {"allowed_domains": ["*.x.example"], "allowed_ports": [443]}, "headers": {"A": "${{ env.LG_WEBHOOK_A }}"}}`))
	f.Add([]byte(`{"env_prefix": "", "headers": {"A": "${{env.X}}${{ env.Y }}"}}`))
	f.Add([]byte(`{"payload_fields": ["run_id", "values", "values", "x"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseWebhookPolicy(data, func(k string) string { return "v-" + k })
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("not an invalid-input error: %v", err)
			}
			return
		}
		for k, v := range p.Headers {
			if strings.ContainsAny(k+v, "\r\n") {
				t.Fatalf("header %q: %q", k, v)
			}
		}
		for _, field := range p.PayloadFields {
			if !slices.Contains(WebhookPayloadFields(), field) {
				t.Fatalf("payload field %q kept", field)
			}
		}
	})
}
