package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestBundleImportKilled kills cairn import into a SQLite store at its
// first write of the database, then its second, fourth, … (strace injects
// SIGKILL on entry to the nth pwrite64) until the import finishes. After
// every kill the store holds the thread whole, exactly as the source's, or
// not at all, and importing again works.
func TestBundleImportKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed")
	}
	dir := t.TempDir()
	src := "sqlite:" + filepath.Join(dir, "src.db")
	if code, _, errOut := cli(t, nil, "bench", "w1", "--steps", "300", "--store", src); code != 0 {
		t.Fatalf("bench: %s", errOut)
	}
	file := filepath.Join(dir, "t.cairn")
	if code, _, errOut := cli(t, nil, "export", "0", "--format", "bundle", "--out", file, "--store", src); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	history := func(url string) (int, string) {
		code, out, _ := cli(t, nil, "history", "0", "--json", "--states", "--store", url)
		return code, out
	}
	_, want := history(src)
	// The target store exists beforehand, with another thread in it.
	base := filepath.Join(dir, "base.db")
	if code, _, errOut := cli(t, nil, "import", file, "--as", "other", "--store", "sqlite:"+base); code != 0 {
		t.Fatalf("import: %s", errOut)
	}
	killed := 0
	for n := 1; ; n *= 2 {
		if n > 1<<16 {
			t.Fatal("the import never finished under strace")
		}
		db := copyStoreFiles(t, base)
		cmd := cairnProcess(t, nil, "import", file, "--store", "sqlite:"+db)
		cmd.Args = append([]string{strace, "-f", "-qq", "-o", os.DevNull, "-e", "trace=pwrite64",
			"-e", "inject=pwrite64:signal=SIGKILL:when=" + strconv.Itoa(n)}, cmd.Args...)
		cmd.Path = strace
		out, err := cmd.CombinedOutput()
		code, got := history("sqlite:" + db)
		switch {
		case code == 0 && got != want:
			t.Fatalf("kill at write %d (%v, %s): the thread differs from its source", n, err, out)
		case code != 0 && err == nil:
			t.Fatalf("the import finished but the thread is missing: %s", out)
		case code != 0:
			// Nothing of it: importing again works.
			if c, _, errOut := cli(t, nil, "import", file, "--store", "sqlite:"+db); c != 0 {
				t.Fatalf("import after a kill at write %d: %s", n, errOut)
			}
			if c, again := history("sqlite:" + db); c != 0 || again != want {
				t.Fatalf("the thread imported after a kill at write %d differs", n)
			}
			killed++
		}
		if err == nil {
			t.Logf("the import finished after %d kills that left nothing", killed)
			if killed == 0 {
				t.Fatal("no kill landed before the import's commit")
			}
			return
		}
	}
}
