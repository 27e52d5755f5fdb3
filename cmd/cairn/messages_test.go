package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFiles writes name → content files into a new directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMissingSchemaFileMessage: a schema file that does not exist is
// named as os.Stat names it ("stat schemas/x.json: …"), with the agent
// file's line; exit 2 and no store.
func TestMissingSchemaFileMessage(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.md": "---\nname: s\nmodel: {provider: scripted, script: r.yaml}\nchain:\n  - {id: one, kind: structured, output_schema: Out}\n" +
			"schemas:\n  Out: schemas/x.json\n---\n## step:one\nGo.\n",
		"r.yaml": "replies: [{text: \"{}\"}]\n",
	})
	db := filepath.Join(dir, "s.db")
	code, _, errOut := cli(t, map[string]string{"CAIRN_STORE": "sqlite:" + db}, "run", filepath.Join(dir, "a.md"))
	want := `a.md:7: schema "Out": stat schemas/x.json: no such file or directory`
	if code != 2 || !strings.Contains(errOut, want) || strings.Contains(errOut, "statat") {
		t.Fatalf("exit %d, stderr %q; want exit 2 saying %q", code, errOut, want)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("a refused run created the store (%v)", err)
	}
}
