package runs

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// WebhookPolicy is what an operator allows of runs' webhooks and adds to
// their deliveries, as LangGraph's LANGGRAPH_WEBHOOKS says it
// (ParseWebhookPolicy).
type WebhookPolicy struct {
	// RequireHTTPS refuses http:// webhooks.
	RequireHTTPS bool
	// AllowedDomains, when set, are the only hosts a webhook may name:
	// "hooks.example.com" exactly, "*.example.com" its subdomains (not
	// the apex).
	AllowedDomains []string
	// AllowedPorts, when set, are the only ports (443 and 80 by default
	// for https and http).
	AllowedPorts []int
	// MaxURLLength bounds a webhook's length (0: 2,048).
	MaxURLLength int
	// DisableLoopback refuses webhooks that are paths (the serving
	// program's own routes, Config.BaseURL).
	DisableLoopback bool
	// Headers go with every delivery; their values (templates resolved at
	// start) are secrets: redacted from everything shown or stored.
	Headers map[string]string
	// PayloadFields, when set, are the only top-level fields of a
	// delivery's body that are posted (WebhookPayloadFields lists them):
	// Cairn's payload_fields, an addition to LangGraph's keys.
	PayloadFields []string
}

// WebhookPayloadFields are the top-level fields of a webhook's body, as
// LangGraph's server posts them: the run's, then run_started_at,
// run_ended_at, webhook_sent_at, values, and error for a run that failed.
func WebhookPayloadFields() []string {
	return []string{"run_id", "thread_id", "assistant_id", "created_at", "updated_at", "status", "metadata", "multitask_strategy", "kwargs",
		"cancel_reason", "run_started_at", "run_ended_at", "webhook_sent_at", "values", "error"}
}

// webhookPolicyFile is LANGGRAPH_WEBHOOKS as LangGraph writes it.
type webhookPolicyFile struct {
	EnvPrefix *string `json:"env_prefix"`
	URL       struct {
		RequireHTTPS    bool     `json:"require_https"`
		AllowedDomains  []string `json:"allowed_domains"`
		AllowedPorts    []int    `json:"allowed_ports"`
		MaxURLLength    int      `json:"max_url_length"`
		DisableLoopback bool     `json:"disable_loopback"`
	} `json:"url"`
	Headers       map[string]string `json:"headers"`
	PayloadFields []string          `json:"payload_fields"`
}

// envTemplate is a header template's reference to the environment.
var envTemplate = regexp.MustCompile(`\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// ParseWebhookPolicy reads LangGraph's LANGGRAPH_WEBHOOKS: {env_prefix,
// url: {require_https, allowed_domains, allowed_ports, max_url_length,
// disable_loopback}, headers}, and Cairn's payload_fields (the body's
// top-level fields to post, of WebhookPayloadFields). Header values may
// hold "${{ env.VAR }}" templates, resolved with getenv, whose VAR must
// start with env_prefix
// (default LG_WEBHOOK_): the boundary that keeps other variables out.
// Unknown keys, bad domains or ports, and unset or out-of-bounds
// variables are errors naming their place.
func ParseWebhookPolicy(data []byte, getenv func(string) string) (WebhookPolicy, error) {
	var f webhookPolicyFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return WebhookPolicy{}, invalid("$", "want {env_prefix, url: {require_https, allowed_domains, allowed_ports, max_url_length, disable_loopback}, headers, payload_fields}: %v", err)
	}
	var err error
	p := WebhookPolicy{RequireHTTPS: f.URL.RequireHTTPS, AllowedDomains: f.URL.AllowedDomains, AllowedPorts: f.URL.AllowedPorts,
		MaxURLLength: f.URL.MaxURLLength, DisableLoopback: f.URL.DisableLoopback}
	for i, d := range p.AllowedDomains {
		if host := strings.TrimPrefix(d, "*."); host == "" || strings.ContainsAny(host, "*/:@ ") {
			return p, invalid(fmt.Sprintf("$.url.allowed_domains[%d]", i), "%q: want a host (hooks.example.com) or *.domain", d)
		}
	}
	for i, port := range p.AllowedPorts {
		if port < 1 || port > 65535 {
			return p, invalid(fmt.Sprintf("$.url.allowed_ports[%d]", i), "%d: want 1 to 65535", port)
		}
	}
	if p.MaxURLLength < 0 {
		return p, invalid("$.url.max_url_length", "%d: want a positive length", p.MaxURLLength)
	}
	if p.PayloadFields, err = payloadFields(f.PayloadFields); err != nil {
		return p, err
	}
	prefix := "LG_WEBHOOK_"
	if f.EnvPrefix != nil {
		prefix = *f.EnvPrefix
	}
	p.Headers, err = resolveHeaders(f.Headers, prefix, getenv)
	return p, err
}

// payloadFields checks payload_fields: known fields, each once; null or
// absent keeps them all, an empty list is refused (a body of nothing).
func payloadFields(in []string) ([]string, error) {
	if in == nil {
		return nil, nil
	}
	if len(in) == 0 {
		return nil, invalid("$.payload_fields", "an empty list posts nothing: name the fields to keep (%s), or leave payload_fields out", strings.Join(WebhookPayloadFields(), ", "))
	}
	for i, f := range in {
		switch {
		case !slices.Contains(WebhookPayloadFields(), f):
			return nil, invalid(fmt.Sprintf("$.payload_fields[%d]", i), "%q: not a field of a webhook's body (%s)", f, strings.Join(WebhookPayloadFields(), ", "))
		case slices.Index(in, f) < i:
			return nil, invalid(fmt.Sprintf("$.payload_fields[%d]", i), "%q: named twice", f)
		}
	}
	return slices.Clone(in), nil
}

// resolveHeaders fills the headers' templates from the environment.
func resolveHeaders(in map[string]string, prefix string, getenv func(string) string) (map[string]string, error) {
	out := map[string]string{}
	for name, tmpl := range in {
		at := "$.headers." + name
		if name == "" || strings.ContainsAny(name, " :\r\n") {
			return nil, invalid(at, "not a header name")
		}
		var bad error
		v := envTemplate.ReplaceAllStringFunc(tmpl, func(m string) string {
			key := envTemplate.FindStringSubmatch(m)[1]
			switch val := getenv(key); {
			case !strings.HasPrefix(key, prefix):
				bad = invalid(at, "${{ env.%s }}: only variables starting with %s (env_prefix) may be named", key, prefix)
			case val == "":
				bad = invalid(at, "${{ env.%s }}: the variable is not set", key)
			default:
				return val
			}
			return ""
		})
		if bad != nil {
			return nil, bad
		}
		if strings.ContainsAny(v, "\r\n") {
			return nil, invalid(at, "a header value holds a line break")
		}
		out[name] = v
	}
	return out, nil
}

// Secrets are the header values, for the redactor.
func (p WebhookPolicy) Secrets() []string {
	var out []string
	for _, v := range p.Headers {
		out = append(out, v)
	}
	return out
}

// check says why the policy refuses a webhook (nil: allowed). path: the
// run named a path, resolved against the serving program's address.
func (p WebhookPolicy) check(raw string, u *url.URL, path bool) error {
	if n := cmp.Or(p.MaxURLLength, 2048); len(raw) > n {
		return fmt.Errorf("%d characters: webhooks are %d at most (max_url_length)", len(raw), n)
	}
	if path {
		if p.DisableLoopback {
			return fmt.Errorf("%q: a path (the server's own route) is not allowed here (disable_loopback)", raw)
		}
		return nil
	}
	if p.RequireHTTPS && u.Scheme != "https" {
		return fmt.Errorf("%q: https only (require_https)", raw)
	}
	host := strings.ToLower(u.Hostname())
	if len(p.AllowedDomains) > 0 && !slices.ContainsFunc(p.AllowedDomains, func(d string) bool { return domainMatch(strings.ToLower(d), host) }) {
		return fmt.Errorf("%q: not an allowed domain (allowed_domains)", host)
	}
	if len(p.AllowedPorts) > 0 {
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
		}
		n, _ := strconv.Atoi(port)
		if !slices.Contains(p.AllowedPorts, n) {
			return fmt.Errorf("port %s is not allowed (allowed_ports)", port)
		}
	}
	return nil
}

// domainMatch: host is d, or under d's wildcard ("*.example.com" matches
// a.example.com, not example.com).
func domainMatch(d, host string) bool {
	if rest, ok := strings.CutPrefix(d, "*."); ok {
		return strings.HasSuffix(host, "."+rest)
	}
	return host == d
}
