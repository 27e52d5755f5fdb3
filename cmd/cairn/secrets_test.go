package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The secrets the scripted model leaks: a password (a default key), an
// sk-… key (a default shape), a value under a configured key and a
// configured shape, and the value of an API key variable.
var leaked = []string{"hunter2hunter2", "sk-abcdefghijklmnopqrstuvwx", "4242-9999-77", "CUSTOM-123456", "plainkeyvalue-0042"}

const leakyAgent = `---
name: leaky
model: {provider: scripted, script: r.yaml}
chain:
  - {id: creds, kind: text}
  - {id: data, kind: structured, output_schema: Out}
schemas:
  Out: {type: object, required: [note]}
secrets:
  keys: [pin_code]
  patterns: ["CUSTOM-[0-9]{6}"]
output: {format: json, file: out/leaky.json}
---
## step:creds
Find the credentials.
## step:data
Report them.
`

const leakyFailing = `replies:
  - step: creds
    error: {status: 500, message: "upstream echoed password=hunter2hunter2 with sk-abcdefghijklmnopqrstuvwx and CUSTOM-123456"}
`

const leakyReplies = `replies:
  - step: creds
    text: "password: hunter2hunter2, key sk-abcdefghijklmnopqrstuvwx, code CUSTOM-123456, env plainkeyvalue-0042"
  - step: data
    json: {password: hunter2hunter2, pin_code: "4242-9999-77", note: "CUSTOM-123456 and sk-abcdefghijklmnopqrstuvwx"}
`

// TestSecretsNeverStoredOrShown runs an agent file whose model replies and
// errors carry secrets, then reads everything Cairn stored or showed: the
// database file's bytes, state, history with states, namespaces, trace and
// session-log exports, progress, results and errors. No secret appears.
func TestSecretsNeverStoredOrShown(t *testing.T) {
	dir := t.TempDir()
	writeFile := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("leaky.md", leakyAgent)
	writeFile("r.yaml", leakyFailing)
	db := filepath.Join(dir, "state.db")
	env := map[string]string{"CAIRN_STORE": "sqlite:" + db, "OPENAI_API_KEY": "plainkeyvalue-0042"}
	var shown bytes.Buffer
	record := func(code int, out, errOut string) int {
		shown.WriteString(out + errOut)
		return code
	}
	if code := record(cli(t, env, "run", filepath.Join(dir, "leaky.md"), "--thread", "s", "--input-text", "token=tok-abcdefgh1234")); code != 1 {
		t.Fatalf("failing run: exit %d\n%s", code, shown.String())
	}
	writeFile("r.yaml", leakyReplies)
	if code := record(cli(t, env, "resume", "s")); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, shown.String())
	}
	if code := record(cli(t, env, "run", filepath.Join(dir, "leaky.md"), "--json")); code != 0 {
		t.Fatalf("json run: exit %d\n%s", code, shown.String())
	}
	for _, args := range [][]string{
		{"state", "s"}, {"state", "s", "--json"}, {"history", "s", "--states"}, {"history", "s", "--json", "--states"},
		{"history", "s", "--tree"}, {"namespaces", "s", "--json"}, {"threads", "--json"},
		{"export", "s", "--format", "trace", "--dir", filepath.Join(dir, "exported", "trace")},
		{"export", "s", "--format", "session-log", "--dir", filepath.Join(dir, "exported", "logs")},
	} {
		if code := record(cli(t, env, args...)); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, shown.String())
		}
	}
	if !strings.Contains(shown.String(), "[REDACTED]") {
		t.Fatalf("nothing was redacted, so the test saw no secret:\n%s", shown.String())
	}
	haystacks := readTree(t, dir, filepath.Join(dir, "r.yaml"))
	haystacks["stdout and stderr"] = shown.Bytes()
	if _, ok := haystacks[db+"-wal"]; !ok {
		if _, ok := haystacks[db]; !ok {
			t.Fatal("no database file to read")
		}
	}
	noSecrets(t, haystacks, append(leaked, "tok-abcdefgh1234")...)
}

// readTree reads every file below dir (the database with its WAL, exported
// files, output files) but those in skip, by path.
func readTree(t *testing.T, dir string, skip ...string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || slices.Contains(skip, p) {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// noSecrets fails for each secret found in one of the haystacks.
func noSecrets(t *testing.T, haystacks map[string][]byte, secrets ...string) {
	t.Helper()
	for name, b := range haystacks {
		for _, secret := range secrets {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the secret %q", name, secret)
			}
		}
	}
}

// TestErrorsShownRedacted: whatever an error message quotes, the CLI shows
// it redacted (here a store path holding a key=value secret).
func TestErrorsShownRedacted(t *testing.T) {
	code, _, errOut := cli(t, nil, "threads", "--store", "sqlite:"+filepath.Join(t.TempDir(), "password=hunter2hunter2", "x.db"))
	if code != 1 || strings.Contains(errOut, "hunter2hunter2") || !strings.Contains(errOut, "[REDACTED]") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestStorePasswordNeverShown: a password in a postgres:// store URL
// appears in no progress line and no error.
func TestStorePasswordNeverShown(t *testing.T) {
	for _, args := range [][]string{
		{"threads", "--store", "postgres://cairn:s3cr3tpw@127.0.0.1:1/db?connect_timeout=1"},
		{"threads", "--store", "postgres://cairn:s3cr3tpw@127.0.0.1:1/db?bogus=1"},
		{"threads", "--store", "postgres://cairn@127.0.0.1:1/db?password=s3cr3tpw&connect_timeout=1"},
		{"run", filepath.Join("..", "..", "examples", "business-extract", "business-extract.md"), "--store", "postgres://cairn:s3cr3tpw@127.0.0.1:1/db?connect_timeout=1"},
	} {
		code, out, errOut := cli(t, nil, args...)
		if code == 0 || strings.Contains(out+errOut, "s3cr3tpw") {
			t.Errorf("%v: exit %d, shows the password:\n%s%s", args, code, out, errOut)
		}
	}
}
