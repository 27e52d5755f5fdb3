package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCodingNetwork(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), &out, "sqlite:"+filepath.Join(dir, "c.db"), "team.yaml", filepath.Join(dir, "prog")); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"planner: Plan: main.go prints", "coder: Wrote greet.go and main.go. (1 tool calls)", "files in kv: [greet.go main.go]"} {
		if !strings.Contains(got, want) {
			t.Fatalf("output lacks %q:\n%s", want, got)
		}
	}
	// The files the agents wrote are a real program.
	if _, err := exec.LookPath("go"); err == nil {
		os.WriteFile(filepath.Join(dir, "prog", "go.mod"), []byte("module prog\n\ngo 1.22\n"), 0o644)
		cmd := exec.Command("go", "run", ".")
		cmd.Dir = filepath.Join(dir, "prog")
		b, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(b)) != "hello, cairn" {
			t.Fatalf("generated program: %s %v", b, err)
		}
	}
}
