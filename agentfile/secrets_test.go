package agentfile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestAgentFileSecrets: an agent file redacts the default secret keys and
// shapes, adds its own keys and patterns, and can turn the defaults off;
// the state, the final output and the output file hold what was stored.
func TestAgentFileSecrets(t *testing.T) {
	const reply = `password: hunter2hunter2, pin_code=9911-22, code CUSTOM-123456, key sk-abcdefghijklmnopqrstuvwx`
	tests := []struct {
		name    string
		secrets string
		hidden  []string
		kept    []string
	}{
		{"defaults", "", []string{"hunter2hunter2", "sk-abcdefghijklmnopqrstuvwx"}, []string{"9911-22", "CUSTOM-123456"}},
		{"defaults and more", "secrets: {keys: [pin_code], patterns: ['CUSTOM-[0-9]{6}']}", []string{"hunter2hunter2", "sk-abcdefghijklmnopqrstuvwx", "9911-22", "CUSTOM-123456"}, nil},
		{"only mine", "secrets: {keys: [pin_code], defaults: false}", []string{"9911-22"}, []string{"hunter2hunter2", "CUSTOM-123456", "sk-abcdefghijklmnopqrstuvwx"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{
				"r.yaml": "replies:\n  - text: \"" + reply + "\"\n",
				"a.md":   "---\nname: a\nmodel: {provider: scripted, script: r.yaml}\noutput: {file: out.txt}\n" + tc.secrets + "\n---\n## Instructions\nx\n",
			})
			a := loadAgent(t, filepath.Join(dir, "a.md"))
			s := inmem.Open(store.Options{})
			res, err := agentfile.Run(context.Background(), a, agentfile.RunConfig{Store: s, Thread: "t"})
			if err != nil {
				t.Fatal(err)
			}
			cp, err := s.Load(context.Background(), store.LoadRequest{Thread: "t"})
			if err != nil {
				t.Fatal(err)
			}
			stored := string(cp.State.AppendJSON(nil))
			out := string(mustRead(t, filepath.Join(dir, "out.txt")))
			for _, where := range []string{stored, string(res.FinalOutput), out} {
				for _, h := range tc.hidden {
					if strings.Contains(where, h) {
						t.Errorf("%q not redacted in %s", h, where)
					}
				}
				for _, k := range tc.kept {
					if !strings.Contains(where, k) {
						t.Errorf("%q redacted in %s", k, where)
					}
				}
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAgentFileSecretValuesChange: the runs of one parsed file reuse its
// redactor while its API key variable holds the same value, and redact a
// new value as soon as the variable changes: each run hides the value its
// variable holds, and only that one.
func TestAgentFileSecretValuesChange(t *testing.T) {
	dir := t.TempDir()
	const first, second = "first-plain-value-0001", "second-plain-value-0002"
	writeFiles(t, dir, map[string]string{
		"r.yaml": "replies:\n  - text: \"one " + first + " two " + second + " end\"\n",
		"a.md":   "---\nname: a\nmodel: {provider: scripted, script: r.yaml, api_key_env: A_KEY}\n---\n## Instructions\nx\n",
	})
	a := loadAgent(t, filepath.Join(dir, "a.md"))
	s := inmem.Open(store.Options{})
	for i, tc := range []struct{ secret, plain string }{{first, second}, {first, second}, {second, first}} {
		getenv := func(k string) string {
			if k == "A_KEY" {
				return tc.secret
			}
			return ""
		}
		th := fmt.Sprintf("t%d", i)
		res, err := agentfile.Run(context.Background(), a, agentfile.RunConfig{Store: s, Thread: th, Getenv: getenv})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := s.Load(context.Background(), store.LoadRequest{Thread: th})
		if err != nil {
			t.Fatal(err)
		}
		for _, where := range []string{string(res.FinalOutput), string(cp.State.AppendJSON(nil))} {
			if strings.Contains(where, tc.secret) || !strings.Contains(where, tc.plain) {
				t.Fatalf("run %d (secret %s): %s", i, tc.secret, where)
			}
		}
	}
}
