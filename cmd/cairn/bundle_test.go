package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
)

// cairnExec runs cairn in a real process with env added and stdin given,
// returning its exit code and output.
func cairnExec(t *testing.T, env []string, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	cmd := cairnProcess(t, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, bytes.NewReader(stdin)
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errb.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// TestBundleCLI: cairn export --format bundle and cairn import, in real
// processes: a thread moves from one SQLite store to a new encrypted one
// (and to PostgreSQL when CAIRN_TEST_POSTGRES is set) and reads the same
// there, checkpoint by checkpoint; its id taken is refused, --as and
// --tenant place it elsewhere; a damaged or cut bundle is refused with
// exit 2 and creates neither a thread nor a store; stdin and stdout work.
func TestBundleCLI(t *testing.T) {
	src := seeded(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "t.cairn")
	code, out, errOut := cairnExec(t, nil, nil, "export", "0", "--format", "bundle", "--out", file, "--store", src)
	if code != 0 || !strings.Contains(out, "31 checkpoints in 1 namespaces") {
		t.Fatalf("export: %d %s %s", code, out, errOut)
	}
	bundle, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	history := func(env []string, url, thread string) string {
		t.Helper()
		code, out, errOut := cairnExec(t, env, nil, "history", thread, "--json", "--states", "--store", url)
		if code != 0 {
			t.Fatalf("history %s: %d %s", thread, code, errOut)
		}
		return out
	}
	want := history(nil, src, "0")
	keys := []string{"CAIRN_ENCRYPTION_KEYS=" + testKey(7)}
	targets := []string{"sqlite:" + filepath.Join(dir, "dst.db")}
	if os.Getenv(pgtest.Env) != "" {
		dsn, _ := pgtest.Schema(t, "bundlecli")
		targets = append(targets, dsn)
	}
	for _, dst := range targets {
		for _, c := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"import", file}, 0, "imported 0 as 0: 31 checkpoints"},
			{[]string{"import", file}, 1, `thread "0" exists`},
			{[]string{"import", file, "--as", "moved"}, 0, "imported 0 as moved"},
			{[]string{"import", file, "--tenant", "acme"}, 0, "imported 0 as acme/0"},
			{[]string{"import", file, "--as", "bad/id"}, 2, "--as"},
		} {
			code, out, errOut := cairnExec(t, keys, nil, append(c.args, "--store", dst)...)
			if code != c.code || !strings.Contains(out+errOut, c.want) {
				t.Fatalf("%v: %d %s %s; want %d %q", c.args, code, out, errOut, c.code, c.want)
			}
		}
		for _, thread := range []string{"0", "moved", "acme/0"} {
			// The history names its thread: the imported one by its own id.
			got := strings.ReplaceAll(history(keys, dst, thread), `"thread": "`+thread+`"`, `"thread": "0"`)
			if got != want {
				t.Fatalf("%s in %s differs:\n%.2000s\nwant:\n%.2000s", thread, dst, got, want)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "dst.db")); bytes.Contains(b, []byte(`"count"`)) {
		t.Fatal("the encrypted store holds a state in plaintext")
	}

	// Refused bundles create nothing, not even the store.
	damaged := bytes.Clone(bundle)
	damaged[len(damaged)/2] ^= 1
	for name, b := range map[string][]byte{"damaged": damaged, "cut": bundle[:len(bundle)-10], "empty": nil} {
		bad := filepath.Join(dir, name+".cairn")
		if err := os.WriteFile(bad, b, 0o644); err != nil {
			t.Fatal(err)
		}
		db := filepath.Join(dir, name+".db")
		code, _, errOut := cairnExec(t, nil, nil, "import", bad, "--store", "sqlite:"+db)
		if code != 2 || !strings.Contains(errOut, bad) || !strings.Contains(errOut, "not a valid thread bundle") {
			t.Fatalf("%s: %d %s", name, code, errOut)
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Fatalf("%s: a refused import made the store (%v)", name, err)
		}
	}

	// stdout and stdin.
	code, piped, errOut := cairnExec(t, nil, nil, "export", "0", "--format", "bundle", "--out", "-", "--store", src)
	if code != 0 || !strings.HasPrefix(piped, "CAIRNBDL") {
		t.Fatalf("export to stdout: %d %s", code, errOut)
	}
	pipeDst := "sqlite:" + filepath.Join(dir, "pipe.db")
	if code, out, errOut := cairnExec(t, nil, []byte(piped), "import", "-", "--store", pipeDst); code != 0 {
		t.Fatalf("import from stdin: %d %s %s", code, out, errOut)
	}
	if got := history(nil, pipeDst, "0"); got != want {
		t.Fatal("the thread imported from stdin differs")
	}
	if code, _, errOut := cairnExec(t, nil, nil, "export", "0", "--format", "bundle", "--dir", dir, "--store", src); code != 2 || !strings.Contains(errOut, "--out") {
		t.Fatalf("bundle with --dir: %d %s", code, errOut)
	}
}
