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

// TestRedactionToldOnceAfterTheRun: secrets redacted from node updates
// are told in one line after the run, not as a warning between the
// progress lines; --log-level info names each update's node.
func TestRedactionToldOnceAfterTheRun(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.md": "---\nname: r\nmodel: {provider: scripted, script: r.yaml}\nchain:\n  - {id: one, kind: text}\n  - {id: two, kind: text}\n  - {id: three, kind: text}\n---\n" +
			"## step:one\nGo.\n## step:two\nGo.\n## step:three\nGo.\n",
		"r.yaml": "replies:\n  - text: \"the key is sk-live-abcdefghijklmnopqrstuvwxyz123456\"\n  - text: \"nothing here\"\n  - text: \"password=hunter2hunter2\"\n",
	})
	env := map[string]string{"CAIRN_STORE": "sqlite:" + filepath.Join(dir, "s.db")}
	const told = "secrets were redacted from 2 node updates before they were stored or shown (--log-level info names the nodes)\n"
	code, _, errOut := cli(t, env, "run", filepath.Join(dir, "a.md"))
	if code != 0 || strings.Contains(errOut, "level=") || strings.Count(errOut, "secrets were redacted") != 1 || !strings.HasSuffix(errOut, told) {
		t.Fatalf("exit %d, stderr:\n%s\nwant no log line and, last, %q", code, errOut, told)
	}
	code, _, errOut = cli(t, env, "run", filepath.Join(dir, "a.md"), "--log-level", "info")
	for _, node := range []string{"one", "three"} {
		if !strings.Contains(errOut, `level=INFO msg="secret redacted from a node's update" node=`+node+" ") {
			t.Errorf("--log-level info does not name node %s:\n%s", node, errOut)
		}
	}
	if code != 0 || strings.Contains(errOut, "node=two ") || !strings.Contains(errOut, "redacted_updates=2") || !strings.HasSuffix(errOut, told) {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}
