package pipeline_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// TestPipelineRefusesChatGate: a gate runs a chain; a chat agent file
// (kind: chat) as a gate is refused at the gate's line before anything
// runs.
func TestPipelineRefusesChatGate(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "r.yaml"), []byte("replies:\n  - text: hi\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "chat.md"), []byte("---\nname: chat\nkind: chat\nmodel: {provider: scripted, script: r.yaml}\n---\n## Instructions\nx\n"), 0o644)
	path := filepath.Join(dir, "p.yaml")
	os.WriteFile(path, []byte("name: p\nmetadata: {domain: a, feature: b}\ngates:\n  - {gate: 1, agent: chat.md}\n"), 0o644)
	p, err := pipeline.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Check(pipeline.Config{Store: inmem.Open(store.Options{}), Thread: "t"})
	if !errors.Is(err, agentfile.ErrInvalidFile) || !strings.Contains(err.Error(), "p.yaml:4: gate 1: chat.md is a chat") {
		t.Fatalf("%v", err)
	}
}
