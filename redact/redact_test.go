package redact_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/redact"
)

const openAIKey = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"

func TestString(t *testing.T) {
	r := redact.Default()
	tests := []struct {
		name, in, want string
	}{
		{"openai key", "key is " + openAIKey + ".", "key is [REDACTED]."},
		{"anthropic key", "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA", "[REDACTED]"},
		{"short sk is prose", "task-list sk-short", "task-list sk-short"},
		{"sk inside a word", "disk-usage-monitoring-service", "disk-usage-monitoring-service"},
		{"bearer", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc", "Authorization: [REDACTED]"},
		{"bearer any case", "bearer abcdefgh123", "[REDACTED]"},
		{"aws", "AKIAABCDEFGHIJKLMNOP in config", "[REDACTED] in config"},
		{"github", "ghp_" + strings.Repeat("a", 36), "[REDACTED]"},
		{"pem", "x -----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY----- y", "x [REDACTED] y"},
		{"clean", "nothing to see", "nothing to see"},
		{"url password", "dial postgres://app:s3cr3t@db:5432/x failed", "dial postgres://app:[REDACTED]@db:5432/x failed"},
		{"url without password", "see https://example.com:8080/a@b and mailto:x@y", "see https://example.com:8080/a@b and mailto:x@y"},
		{"key=value", "dial: password=hunter2 host=db", "dial: password=[REDACTED] host=db"},
		{"json text", `payload: {"question":"q","token":"abc","API-Key": 12}`, `payload: {"question":"q","token":"[REDACTED]","API-Key": [REDACTED]}`},
		{"escaped json text", `{\"secret\":\"s3\"}`, `{\"secret\":\"[REDACTED]\"}`},
		{"null kept", `"token":null`, `"token":null`},
		{"longer names untouched", "tokens: 5, my_password=x", "tokens: 5, my_password=x"},
		{"hyphenated longer names untouched", "my-password=x", "my-password=x"},
		{"a path segment", "open /tmp/password=hunter2/x.db", "open /tmp/password=[REDACTED]"},
		{"key at the start", "password: hunter2", "password: [REDACTED]"},
		{"key after a brace", "{password=hunter2}", "{password=[REDACTED]}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.String(tc.in); got != tc.want {
				t.Fatalf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestJSON(t *testing.T) {
	r, err := redact.New(redact.Config{Keys: []string{"ssn"}, Patterns: []string{`\d{3}-\d{2}-\d{4}`}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, in, want string
	}{
		{"secret keys any case and depth", `{"user":{"Password":"hunter22","API_KEY":"x","apiKey":7,"api-key":{"a":1},"ssn":"1"}}`,
			`{"user":{"API_KEY":"[REDACTED]","Password":"[REDACTED]","api-key":"[REDACTED]","apiKey":"[REDACTED]","ssn":"[REDACTED]"}}`},
		{"empty and null kept", `{"token":"","secret":null}`, `{"token":"","secret":null}`},
		{"shapes in strings and arrays", `{"notes":["call with ` + openAIKey + `","ok"]}`, `{"notes":["call with [REDACTED]","ok"]}`},
		{"shapes in member names", `{"` + openAIKey + `":1}`, `{"[REDACTED]":1}`},
		{"user pattern", `{"text":"ssn 123-45-6789"}`, `{"text":"ssn [REDACTED]"}`},
		{"no html escaping", `{"t":"<a> & ` + openAIKey + `"}`, `{"t":"<a> & [REDACTED]"}`},
		{"numbers kept exactly", `{"n":1.50000000000000000001,"token":"x"}`, `{"n":1.50000000000000000001,"token":"[REDACTED]"}`},
		{"clean returns input bytes", `{ "a" : [1, 2] }`, `{ "a" : [1, 2] }`},
		{"similar keys untouched", `{"tokens":{"input":3},"my_password":"p"}`, `{"tokens":{"input":3},"my_password":"p"}`},
		{"invalid json is a string", `{"a": "` + openAIKey, `{"a": "[REDACTED]`},
		{"trailing data is a string", `{} ` + openAIKey, `{} [REDACTED]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(r.JSON([]byte(tc.in))); got != tc.want {
				t.Fatalf("JSON(%s) =\n %s\nwant\n %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestNoDefaults(t *testing.T) {
	r, err := redact.New(redact.Config{NoDefaults: true, Keys: []string{"pin"}})
	if err != nil {
		t.Fatal(err)
	}
	in := `{"password":"` + openAIKey + `","PIN":"1234"}`
	if got, want := string(r.JSON([]byte(in))), `{"PIN":"[REDACTED]","password":"`+openAIKey+`"}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  redact.Config
		want string
	}{
		{"bad regexp", redact.Config{Patterns: []string{"ok", "(unclosed"}}, `"(unclosed"`},
		{"matches empty", redact.Config{Patterns: []string{"a*"}}, `"a*"`},
		{"empty key", redact.Config{Keys: []string{"_"}}, "key 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redact.New(tc.cfg)
			if !errors.Is(err, redact.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidConfig naming %s", err, tc.want)
			}
		})
	}
}

func TestNil(t *testing.T) {
	var r *redact.Redactor
	err := errors.New(openAIKey)
	if r.String(openAIKey) != openAIKey || string(r.JSON([]byte(`{"password":"x"}`))) != `{"password":"x"}` ||
		r.Error(err) != err || r.Value("x") != "x" || r.IsSecretKey("password") {
		t.Fatal("a nil redactor changed something")
	}
}

func TestWithSecrets(t *testing.T) {
	r := redact.Default().WithSecrets("plain-env-value-42", "", "abc")
	got := r.String("got plain-env-value-42 and abc and " + openAIKey)
	if want := "got [REDACTED] and abc and [REDACTED]"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if redact.Default().String("plain-env-value-42") != "plain-env-value-42" {
		t.Fatal("WithSecrets changed the receiver")
	}
	var nilR *redact.Redactor
	if got := nilR.WithSecrets("literal-only").String("a literal-only b"); got != "a [REDACTED] b" {
		t.Fatalf("nil.WithSecrets: %q", got)
	}
}

func TestError(t *testing.T) {
	r := redact.Default()
	base := fmt.Errorf("open %s: %w", openAIKey, fs.ErrNotExist)
	err := r.Error(base)
	if strings.Contains(err.Error(), openAIKey) || !strings.Contains(err.Error(), "[REDACTED]") {
		t.Fatalf("message not redacted: %v", err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("redacted error lost its chain")
	}
	clean := errors.New("clean")
	if r.Error(clean) != clean {
		t.Fatal("a clean error was wrapped")
	}
}

func TestValue(t *testing.T) {
	r := redact.Default()
	in := map[string]any{"auth": map[string]any{"token": "t0k3n"}, "list": []any{"Bearer abcdefghijkl"}, "n": 1.5}
	got, _ := json.Marshal(r.Value(in))
	if want := `{"auth":{"token":"[REDACTED]"},"list":["[REDACTED]"],"n":1.5}`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if in["auth"].(map[string]any)["token"] != "t0k3n" {
		t.Fatal("Value changed its input")
	}
	type creds struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	got, _ = json.Marshal(r.Value(creds{"ann", "pw"}))
	if want := `{"password":"[REDACTED]","user":"ann"}`; string(got) != want {
		t.Fatalf("struct: got %s, want %s", got, want)
	}
	if v := r.Value(creds{"ann", ""}); v != (creds{"ann", ""}) {
		t.Fatalf("a clean struct changed: %#v", v)
	}
	// Structs nested in decoded values are redacted too.
	got, _ = json.Marshal(r.Value(map[string]any{"record": creds{"bob", "pw"}, "list": []any{creds{"c", "x"}}, "n": 3}))
	if want := `{"list":[{"password":"[REDACTED]","user":"c"}],"n":3,"record":{"password":"[REDACTED]","user":"bob"}}`; string(got) != want {
		t.Fatalf("nested struct: got %s, want %s", got, want)
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"password=x", `"token": "a\"b"`, `{\"apiKey\":\"v\"}`, "Bearer abcdefghij sk-aaaaaaaaaaaaaaaaaaaa"} {
		f.Add(s)
	}
	r := redact.Default()
	f.Fuzz(func(t *testing.T, in string) {
		out := r.String(in)
		if again := r.String(out); again != out {
			t.Fatalf("not idempotent:\n%q\n%q\n%q", in, out, again)
		}
	})
}

func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"password":"x"}`, `["` + openAIKey + `"]`, `"Bearer abcdefghij"`, `{"a":{"b":[1,"sk-aaaaaaaaaaaaaaaaaaaa"]}}`, `not json`, `{"API-key":null}`} {
		f.Add([]byte(s))
	}
	r := redact.Default().WithSecrets("literal-secret")
	f.Fuzz(func(t *testing.T, in []byte) {
		out := r.JSON(in)
		if again := r.JSON(out); string(again) != string(out) {
			t.Fatalf("not idempotent:\n%q\n%q\n%q", in, out, again)
		}
		if json.Valid(in) && !json.Valid(out) {
			t.Fatalf("valid JSON became invalid: %q → %q", in, out)
		}
		if strings.Contains(string(out), "literal-secret") {
			t.Fatalf("literal survived: %q", out)
		}
		var v any
		if json.Unmarshal(out, &v) == nil {
			if b, _ := json.Marshal(v); strings.Contains(string(b), "literal-secret") {
				t.Fatalf("literal survived decoding: %q", out)
			}
		}
	})
}
