package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSpecialFilesRefused: a path to a device, a named pipe or a directory
// where a file is expected gets a clear error (exit 2) at once, instead of
// a hang or an exhausted memory, and nothing is stored.
func TestSpecialFilesRefused(t *testing.T) {
	dir := copyExample(t)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(outside, []byte(`{"type":"object"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	pipeline := func(contract string) string {
		path := filepath.Join(dir, "p-"+filepath.Base(contract)+".yaml")
		if err := os.WriteFile(path, []byte("name: x\nmetadata: {domain: a.com, feature: f}\ngates:\n  - {gate: 1, name: A, step: s, contract: "+contract+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	db := filepath.Join(dir, "state.db")
	env := map[string]string{"CAIRN_STORE": "sqlite:" + db}
	agentFile := filepath.Join(dir, "business-extract.md")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"agent file is a device", []string{"run", "/dev/zero"}, "it is a device"},
		{"agent file is a directory", []string{"run", dir + "/input"}, "it is a directory"},
		{"input is a named pipe", []string{"run", agentFile, "--input", fifo}, "it is a named pipe"},
		{"script is a device", []string{"run", agentFile, "--model", "scripted:/dev/zero"}, "it is a device"},
		{"contract is a named pipe", []string{"run", pipeline("fifo")}, "it is a named pipe"},
		{"contract outside the pipeline's folder", []string{"run", pipeline("/dev/zero")}, "outside"},
		{"contract above the pipeline's folder", []string{"run", pipeline("../x.json")}, "outside"},
		{"contract linked from outside", []string{"run", pipeline("link.json")}, "escapes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := cli(t, env, tc.args...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 saying %q", code, errOut, tc.want)
			}
			if _, err := os.Stat(db); !os.IsNotExist(err) {
				t.Fatalf("a refused run created the store (%v)", err)
			}
		})
	}
}
