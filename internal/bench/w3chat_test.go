package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

// TestW3ChatFile runs W3's two series on the chat agent file of
// examples/serve (kind: chat, its scripted model answering as W3's Go
// graph does), served by the bench's own server process: the same checks
// (every answer, the whole conversation at the end) and figures.
func TestW3ChatFile(t *testing.T) {
	file := filepath.Join("..", "..", "examples", "serve", "chat.md")
	prof := filepath.Join(t.TempDir(), "cpu")
	res, err := RunW3(context.Background(), W3Config{Turns: 20, AssistantFile: file, Program: testProgram, CPUProfile: prof})
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(file)
	if res.Assistant != "chat" || res.AssistantFile != abs || len(res.Series) != 2 {
		t.Fatalf("result %+v", res)
	}
	for i, s := range res.Series {
		checkW3Series(t, s, []string{"wait", "stream"}[i], prof)
	}
	// The file is what answers: one whose model answers otherwise fails
	// W3's checks.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "r.yaml"), []byte("replies:\n  - {text: no idea, repeat: true}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "chat.md"), []byte("---\nname: chat\nkind: chat\nmodel: {provider: scripted, script: r.yaml}\n---\n## Instructions\nx\n"), 0o644)
	_, err = RunW3(context.Background(), W3Config{Turns: 2, Series: []string{"wait"}, AssistantFile: filepath.Join(dir, "chat.md"), Program: testProgram})
	if !errors.Is(err, ErrCheck) || !strings.Contains(err.Error(), "lacks the assistant's reply") {
		t.Fatalf("a file answering otherwise: %v", err)
	}
}

func TestW3ChatFileConfig(t *testing.T) {
	serve := filepath.Join("..", "..", "examples", "serve")
	for _, tc := range []struct {
		name string
		cfg  W3Config
	}{
		{"not a chat", W3Config{AssistantFile: filepath.Join(serve, "five-steps.md")}},
		{"missing", W3Config{AssistantFile: filepath.Join(serve, "nope.md")}},
		{"with an external server", W3Config{AssistantFile: filepath.Join(serve, "chat.md"), URL: "http://127.0.0.1:1"}},
		{"another assistant id", W3Config{AssistantFile: filepath.Join(serve, "chat.md"), Assistant: "other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := RunW3(context.Background(), tc.cfg); err == nil || (tc.name != "missing" && !errors.Is(err, store.ErrInvalidArgument)) {
				t.Fatalf("err %v", err)
			}
		})
	}
	c, err := ParseServeArgs([]string{"--store", "memory:", "--assistant-file", "chat.md"})
	if err != nil || c.AssistantFile != "chat.md" {
		t.Fatalf("%+v %v", c, err)
	}
}
