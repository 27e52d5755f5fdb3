package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSteerCommand: cairn steer --no-run adds a message to a chat
// thread's inbox (redacted before it is stored: the secret is in none of
// the store's bytes), which the thread's next run takes at its first
// model call; without --no-run, on a thread whose run finished, it runs
// the thread at once and the run answers the message. It refuses, with
// exit 2 and nothing stored, a missing thread, another tenant's, a
// chain's and an empty message.
func TestSteerCommand(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "state.db")
	env := map[string]string{"CAIRN_STORE": "sqlite:" + dbPath}
	chat := steerChat(t, 0)
	chain := filepath.Join(filepath.Dir(chat), "chain.md")
	if err := os.WriteFile(chain, []byte("---\nname: chain\nmodel: {provider: scripted, script: replies/chain.yaml}\nchain:\n  - {id: a, kind: text, prompt_section: \"step:a\"}\n---\n\n## step:a\n\nA.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(chat), "replies", "chain.yaml"), []byte("replies:\n  - {text: done, repeat: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, run := range [][]string{{"run", chat, "--thread", "s1", "--input-text", "which files?"}, {"run", chain, "--thread", "k1", "--input-text", "go"}} {
		if code, _, errOut := cli(t, env, run...); code != 0 {
			t.Fatalf("%v: %d %s", run, code, errOut)
		}
	}
	const secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
	code, out, errOut := cli(t, env, "steer", "s1", "the key is "+secret, "--json", "--no-run")
	var it map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &it) != nil || it["seq"] != 1.0 || it["state"] != "pending" || strings.Contains(out, secret) {
		t.Fatalf("steer: %d %s %s", code, out, errOut)
	}
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"missing thread", []string{"steer", "nope", "x"}, `"nope" not found`},
		{"another tenant", []string{"steer", "s1", "x", "--tenant", "globex"}, `"s1" not found`},
		{"a chain", []string{"steer", "k1", "x"}, "only chats"},
		{"empty", []string{"steer", "s1", ""}, "empty"},
		{"bad id", []string{"steer", "a b", "x"}, "thread"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, _, errOut := cli(t, env, tc.args...); code != 2 || !strings.Contains(errOut, tc.says) {
				t.Fatalf("%d %s", code, errOut)
			}
		})
	}
	if code, _, errOut := cli(t, env, "run", chat, "--thread", "s1", "--input-text", "more"); code != 0 {
		t.Fatalf("next run: %d %s", code, errOut)
	}
	f := readSteerFacts(t, env["CAIRN_STORE"], "s1")
	checkOnce(t, f, 1, "more")
	if got := f.msgs[len(f.msgs)-2:]; !strings.HasPrefix(got[0], "human:the key is ") || strings.Contains(got[0], secret) || !strings.HasPrefix(got[1], "ai:You said: the key is ") {
		t.Fatalf("the steer, taken and answered: %q", f.msgs)
	}
	code, out, errOut = cli(t, env, "steer", "s1", "then summarise", "--follow-up")
	if code != 0 || !strings.Contains(out, "follow_up 2 accepted (pending)") || !strings.Contains(out, "You said: then summarise") {
		t.Fatalf("steer on an idle thread: %d %s %s", code, out, errOut)
	}
	f = readSteerFacts(t, env["CAIRN_STORE"], "s1")
	checkOnce(t, f, 2, "more", "then summarise")
	if got := f.msgs[len(f.msgs)-2:]; got[0] != "human:then summarise" || got[1] != "ai:You said: then summarise" {
		t.Fatalf("the follow-up, run at once: %q", f.msgs)
	}
	for _, suffix := range []string{"", "-wal"} {
		b, _ := os.ReadFile(dbPath + suffix)
		if strings.Contains(string(b), secret) {
			t.Fatalf("the secret is in %s%s", dbPath, suffix)
		}
	}
}
