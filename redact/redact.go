package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Replacement is the text that stands in for a secret.
const Replacement = "[REDACTED]"

// ErrInvalidConfig: a pattern does not compile.
var ErrInvalidConfig = errors.New("redact: invalid config")

// MinSecretLen is the shortest literal secret WithSecrets accepts; shorter
// values would redact ordinary text.
const MinSecretLen = 4

// DefaultKeys are the secret keys redacted unless Config.NoDefaults.
var defaultKeys = []string{"password", "passwd", "secret", "token", "api_key", "authorization",
	"access_token", "refresh_token", "client_secret", "private_key", "x-api-key"}

// defaultPatterns are the secret shapes redacted unless Config.NoDefaults.
var defaultPatterns = []string{
	`\bsk-[A-Za-z0-9_-]{16,}`,
	`(?i:\bbearer\s+[A-Za-z0-9._~+/-]{8,}=*)`,
	`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`,
	`\bgh[pousr]_[A-Za-z0-9]{20,}`,
	`\bgithub_pat_[A-Za-z0-9_]{20,}`,
	`\bxox[abposr]-[A-Za-z0-9-]{10,}`,
	`\bAIza[0-9A-Za-z_-]{35}`,
	`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`,
}

// DefaultKeys returns the keys redacted by default.
func DefaultKeys() []string { return slices.Clone(defaultKeys) }

// DefaultPatterns returns the secret shapes redacted by default.
func DefaultPatterns() []string { return slices.Clone(defaultPatterns) }

// Config says what to redact besides the defaults.
type Config struct {
	// Keys are JSON member names whose values are secret (see the package
	// documentation for how names match).
	Keys []string
	// Patterns are Go regular expressions matched in every string.
	Patterns []string
	// NoDefaults turns the default keys and patterns off.
	NoDefaults bool
}

// Redactor hides secrets. The zero value and nil redact nothing.
type Redactor struct {
	keys     map[string]bool
	patterns []string // sources, for WithSecrets to rebuild re
	literals []string
	re       *regexp.Regexp // every pattern and literal, one alternation
	kv       *regexp.Regexp // "key": value, key=value forms of secret keys in text
	userinfo bool           // hide the password of URLs (scheme://user:password@host)
	pre      *prefilter     // skips the expressions for text that holds nothing
	progOnce sync.Once      // compiles progs, the expressions of a Stream
	progs    *programs
}

// urlPassword matches the password of a URL's user information.
var urlPassword = regexp.MustCompile(`(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)([^/\s@]+)@`)

// New builds a redactor from cfg; a pattern that does not compile is an
// error naming it.
func New(cfg Config) (*Redactor, error) {
	r := &Redactor{keys: map[string]bool{}}
	var keys, pats []string
	if !cfg.NoDefaults {
		keys, pats = append(keys, defaultKeys...), append(pats, defaultPatterns...)
	}
	for i, k := range cfg.Keys {
		if normKey(k) == "" {
			return nil, fmt.Errorf("%w: key %d is empty", ErrInvalidConfig, i+1)
		}
	}
	for _, p := range cfg.Patterns {
		if p == "" {
			return nil, fmt.Errorf("%w: empty pattern", ErrInvalidConfig)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("%w: pattern %q: %v", ErrInvalidConfig, p, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("%w: pattern %q matches the empty string", ErrInvalidConfig, p)
		}
	}
	for _, k := range append(keys, cfg.Keys...) {
		r.keys[normKey(k)] = true
	}
	r.patterns = append(pats, cfg.Patterns...)
	r.kv = kvRegexp(r.keys)
	r.userinfo = !cfg.NoDefaults
	if err := r.compile(); err != nil {
		return nil, err
	}
	return r, nil
}

// Default returns a redactor with the default keys and patterns.
func Default() *Redactor {
	r, err := New(Config{})
	if err != nil {
		panic(err) // the defaults compile; a test checks it
	}
	return r
}

// WithSecrets returns a copy of r that also redacts these literal values
// wherever they occur (an API key read from the environment). Values
// shorter than MinSecretLen are ignored. A nil r yields a redactor with
// only these literals.
func (r *Redactor) WithSecrets(values ...string) *Redactor {
	out := &Redactor{keys: map[string]bool{}}
	if r != nil {
		for k := range r.keys {
			out.keys[k] = true
		}
		out.patterns = slices.Clone(r.patterns)
		out.literals = slices.Clone(r.literals)
		out.kv = r.kv
		out.userinfo = r.userinfo
	}
	for _, v := range values {
		if len(v) >= MinSecretLen && !slices.Contains(out.literals, v) {
			out.literals = append(out.literals, v)
		}
	}
	// Longer literals first, so one containing another is hidden whole.
	slices.SortStableFunc(out.literals, func(a, b string) int { return len(b) - len(a) })
	if err := out.compile(); err != nil {
		panic(err) // quoted literals and checked patterns always compile
	}
	return out
}

// compile joins the literals and patterns into one expression.
func (r *Redactor) compile() error {
	r.pre = newPrefilter(r.patterns, r.literals, r.keys)
	parts := make([]string, 0, len(r.literals)+len(r.patterns))
	for _, l := range r.literals {
		parts = append(parts, regexp.QuoteMeta(l))
	}
	for _, p := range r.patterns {
		parts = append(parts, "(?:"+p+")")
	}
	if len(parts) == 0 {
		r.re = nil
		return nil
	}
	re, err := regexp.Compile(strings.Join(parts, "|"))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	r.re = re
	return nil
}

// normKey folds a key name for matching: lower case, no '-' or '_'.
func normKey(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	for _, c := range strings.ToLower(k) {
		if c != '-' && c != '_' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// IsSecretKey reports whether values under the member name key are redacted.
func (r *Redactor) IsSecretKey(key string) bool {
	if r == nil || len(r.keys) == 0 {
		return false
	}
	return r.keys[normKey(key)]
}

// String hides secret shapes and literal secrets in s, and the values of
// secret keys written as text: `"token": "abc"`, `token=abc`,
// `password: abc` (as in error messages and logged JSON) keep the key and
// lose the value.
func (r *Redactor) String(s string) string {
	if r == nil || r.pre.quiet(s) && !(r.userinfo && strings.Contains(s, "://")) {
		return s
	}
	return r.stringSlow(s)
}

// stringSlow is String without the prefilter.
func (r *Redactor) stringSlow(s string) string {
	if r.re != nil {
		s = r.re.ReplaceAllLiteralString(s, Replacement)
	}
	if r.kv != nil && strings.ContainsAny(s, ":=") {
		s = r.kv.ReplaceAllStringFunc(s, r.kvValue)
	}
	if r.userinfo && strings.Contains(s, "://") {
		s = urlPassword.ReplaceAllString(s, "${1}"+Replacement+"@")
	}
	return s
}

// kvValue replaces the value of one key-value match, keeping its quotes.
func (r *Redactor) kvValue(m string) string {
	sub := r.kv.FindStringSubmatch(m)
	return sub[1] + kvReplace(sub[2])
}

// kvRegexp matches a secret key followed by ':' or '=' and a value: a
// quoted string (possibly escaped inside JSON text) or a run of characters
// up to a separator. Group 1 is everything before the value, group 2 the
// value.
func kvRegexp(keys map[string]bool) *regexp.Regexp {
	if len(keys) == 0 {
		return nil
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		var b strings.Builder
		for i, c := range k {
			if i > 0 {
				b.WriteString("[-_]?")
			}
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
		names = append(names, b.String())
	}
	slices.Sort(names)
	slices.SortStableFunc(names, func(a, b string) int { return len(b) - len(a) })
	// The key must stand alone, not end a longer name (my-password), hence
	// the character before it (Go's regexp has no look-behind). After '/'
	// or '.' it still counts (a path segment "password=…" is redacted); a
	// path ending in a key name followed by '":' is over-redacted rather
	// than risk a leak.
	return regexp.MustCompile(`(?i)((?:^|[^A-Za-z0-9_\-])(?:` + strings.Join(names, "|") + `)\\?"?\s*[:=]\s*)(\\?"(?:[^"\\]|\\[^"])*\\?"|[^\s,;&}\]\["]+)`)
}

// JSON redacts a JSON document: values under secret keys at any depth, and
// secret shapes in every string, object member names included. The result
// is compact JSON without HTML escaping; raw comes back unchanged (the same
// slice) when there is nothing to hide. Bytes that are not valid JSON are
// redacted as a string.
func (r *Redactor) JSON(raw []byte) []byte {
	if r == nil || len(raw) == 0 || r.pre.quietJSON(raw) {
		return raw
	}
	return r.jsonSlow(raw)
}

// jsonSlow is JSON without the prefilter.
func (r *Redactor) jsonSlow(raw []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return r.bytesAsString(raw)
	}
	if _, err := d.Token(); err == nil {
		return r.bytesAsString(raw)
	}
	out, changed := r.walk(v)
	if !changed {
		return raw
	}
	b, err := Marshal(out)
	if err != nil {
		return r.bytesAsString(raw) // decoded JSON always encodes
	}
	return b
}

func (r *Redactor) bytesAsString(raw []byte) []byte {
	s := string(raw)
	if out := r.String(s); out != s {
		return []byte(out)
	}
	return raw
}

// Marshal encodes v as compact JSON without HTML escaping.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Value redacts a value: decoded JSON (map[string]any, []any, string and
// the other types encoding/json decodes to) is walked; other values, at
// the top or nested in maps and slices, are encoded to JSON, redacted, and
// returned decoded (as map[string]any and so on) when something was
// hidden, unchanged otherwise.
func (r *Redactor) Value(v any) any {
	if r == nil {
		return v
	}
	out, _ := r.walk(v)
	return out
}

// valueJSON redacts a value of any other type through its JSON encoding.
func (r *Redactor) valueJSON(v any) (any, bool) {
	if raw, ok := v.(json.RawMessage); ok {
		out := r.JSON(raw)
		return json.RawMessage(out), !bytes.Equal(out, raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v, false
	}
	out := r.JSON(b)
	if bytes.Equal(out, b) {
		return v, false
	}
	var dv any
	d := json.NewDecoder(bytes.NewReader(out))
	d.UseNumber()
	if d.Decode(&dv) != nil {
		return string(out), true
	}
	return dv, true
}

// walk redacts a decoded JSON value and reports whether it changed.
// Containers are copied only when something in them changed.
func (r *Redactor) walk(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		s := r.String(x)
		return s, s != x
	case []any:
		var out []any
		for i, e := range x {
			ne, ch := r.walk(e)
			if ch && out == nil {
				out = slices.Clone(x)
			}
			if out != nil {
				out[i] = ne
			}
		}
		if out == nil {
			return x, false
		}
		return out, true
	case map[string]any:
		return r.walkObject(x)
	case nil, bool, float64, float32, int, int64, int32, uint, uint64, uint32, json.Number:
		return v, false
	}
	return r.valueJSON(v)
}

func (r *Redactor) walkObject(x map[string]any) (any, bool) {
	var out map[string]any
	for k, e := range x {
		nk := r.String(k)
		var ne any
		var ch bool
		if r.IsSecretKey(k) && e != nil && e != "" {
			ne, ch = Replacement, e != Replacement
		} else {
			ne, ch = r.walk(e)
		}
		if !ch && nk == k {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(x))
			for k2, e2 := range x {
				out[k2] = e2
			}
		}
		if nk != k {
			delete(out, k)
		}
		out[nk] = ne
	}
	if out == nil {
		return x, false
	}
	return out, true
}

// Error returns err with its message redacted. The result still unwraps to
// err, so errors.Is and errors.As see the original chain (whose own
// messages are not redacted: show the returned error, not what As finds).
// err comes back as it is when its message holds nothing to hide.
func (r *Redactor) Error(err error) error {
	if r == nil || err == nil {
		return err
	}
	msg := err.Error()
	red := r.String(msg)
	if red == msg {
		return err
	}
	return &redactedError{msg: red, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
