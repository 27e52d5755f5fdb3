package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cairnCommand finds `go run ./cmd/cairn ARGS` in the README, in shell
// blocks (up to a # comment) and in inline code.
var cairnCommand = regexp.MustCompile("(?m)(?:^|`)go run ./cmd/cairn ([^`#\n…]+)")

// TestReadmeCommands runs every cairn command the README shows, in order,
// in a copy of the examples with the default store: each must succeed.
func TestReadmeCommands(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(examples)); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	found := cairnCommand.FindAllStringSubmatch(string(readme), -1)
	if len(found) < 9 {
		t.Fatalf("found %d README commands", len(found))
	}
	for _, m := range found {
		args := strings.Fields(m[1])
		if args[0] == "bench" {
			args = append(args, "--steps", "20") // the same command, smaller
		}
		if code, out, errOut := cli(t, nil, args...); code != 0 {
			t.Errorf("README: cairn %s: exit %d\n%s\n%s", m[1], code, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "trace-out", "manifest.json")); err != nil {
		t.Fatalf("the README's export wrote no trace: %v", err)
	}
}
