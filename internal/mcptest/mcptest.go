// Package mcptest builds and starts the MCP server of Cairn's tests
// (internal/mcptest/server, written with the official Go SDK) as a real
// process.
package mcptest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Build compiles the test server into dir and returns the binary's path.
func Build(t testing.TB, dir string) string {
	t.Helper()
	bin, err := BuildIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// BuildIn is Build for a TestMain: it compiles the test server into dir.
func BuildIn(dir string) (string, error) {
	_, here, _, _ := runtime.Caller(0)
	bin := filepath.Join(dir, "mcptest-server")
	cmd := exec.Command("go", "build", "-o", bin, "./server")
	cmd.Dir = filepath.Dir(here)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the MCP test server: %v\n%s", err, out)
	}
	return bin, nil
}

// StartHTTP starts the server binary on a free loopback port, serving
// streamable HTTP, with env ("KEY=value") added to its environment and
// args added to its command line; it returns the endpoint's URL. The
// process is killed when the test ends.
func StartHTTP(t testing.TB, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-http", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case line := <-lines:
		url, ok := strings.CutPrefix(line, "listening ")
		if !ok {
			t.Fatalf("MCP test server said %q", line)
		}
		return url
	case <-time.After(30 * time.Second):
		t.Fatal("the MCP test server did not start")
	}
	return ""
}
