package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Program makes the command that runs cairn with args in a process of
// its own: the bench's server (ServeCommand) and the CLI.
type Program func(args ...string) *exec.Cmd

// ErrServer: the bench's server process failed to start or stop.
var ErrServer = errors.New("bench: server process")

// child is a running server process of the bench.
type child struct {
	cmd    *exec.Cmd
	url    string
	stderr *tail
	done   chan error // the process's exit
}

// startServer starts the chat server on storeURL (ServeMain) in a
// process of its own and waits until it accepts connections.
func startServer(ctx context.Context, prog Program, storeURL, cpuProfile, assistantFile string) (*child, error) {
	if prog == nil {
		return nil, fmt.Errorf("%w: no program to start (Config.Program)", ErrServer)
	}
	args := []string{ServeCommand, "--store", storeURL, "--addr", "127.0.0.1:0"}
	if cpuProfile != "" {
		args = append(args, "--cpuprofile", cpuProfile)
	}
	if assistantFile != "" {
		args = append(args, "--assistant-file", assistantFile)
	}
	cmd := prog(args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stderr: &tail{max: 16 << 10}, done: make(chan error, 1)}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrServer, err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				lines <- u
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
		c.done <- cmd.Wait()
	}()
	select {
	case c.url = <-lines:
		return c, nil
	case err := <-c.done:
		c.done <- err
		return nil, fmt.Errorf("%w: exited before listening (%v): %s", ErrServer, err, c.stderr)
	case <-time.After(time.Minute):
	case <-ctx.Done():
	}
	_ = c.stop()
	return nil, fmt.Errorf("%w: no address after a minute: %s", ErrServer, c.stderr)
}

// stop ends the server (SIGTERM; SIGKILL after 30 s) and waits for it.
func (c *child) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		if err != nil {
			return fmt.Errorf("%w: %v: %s", ErrServer, err, c.stderr)
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("%w: did not stop within 30 s of SIGTERM (killed): %s", ErrServer, c.stderr)
	}
}

// serverStats reads what the server measured of itself.
func (c *child) serverStats(ctx context.Context, hc *http.Client) (ServerStats, error) {
	var st ServerStats
	if err := getJSON(ctx, hc, c.url+statsPath, &st); err != nil {
		return st, fmt.Errorf("%w: stats: %w", ErrServer, err)
	}
	return st, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// clockTicks is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on
// Linux).
const clockTicks = 100

// cpuOf reads the CPU time (user and system) of process pid from
// /proc/PID/stat; 0 when it cannot be read.
func cpuOf(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // field 14: utime
	st, err2 := strconv.ParseInt(f[12], 10, 64) // field 15: stime
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * time.Second / clockTicks
}
