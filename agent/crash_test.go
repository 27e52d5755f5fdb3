package agent_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

const threeAgents = `replies:
  - step: researcher
    text: "Three sources agree."
  - step: writer
    delay_ms: 400
    text: "A draft built on three sources."
  - step: editor
    text: "Edited: the draft is ready."
`

// loggingModel records every model call with its idempotency key before
// making it.
type loggingModel struct {
	m    agent.Model
	mu   sync.Mutex
	f    *os.File
	proc string
}

func (l *loggingModel) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	info, _ := flow.Info(ctx)
	l.mu.Lock()
	fmt.Fprintf(l.f, "%s %s %s\n", l.proc, req.Step, info.Key)
	l.mu.Unlock()
	return l.m.Generate(ctx, req)
}

func threeAgentNetwork(m agent.Model) *agent.Network {
	order := []string{"researcher", "writer", "editor"}
	var agents []*agent.Agent
	for _, name := range order {
		agents = append(agents, &agent.Agent{Name: name, Description: name, Model: m})
	}
	return &agent.Network{Name: "three", Agents: agents, Router: func(ctx context.Context, v agent.NetworkView) ([]string, error) {
		if v.CallCount < len(order) {
			return []string{order[v.CallCount]}, nil
		}
		return nil, nil
	}}
}

func networkChild(db, logPath, proc string) error {
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := scripted.Parse("three.yaml", []byte(threeAgents))
	if err != nil {
		return err
	}
	s, err := sqlite.OpenStore(context.Background(), db, sqlite.Options{}, store.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	g, err := threeAgentNetwork(&loggingModel{m: m, f: f, proc: proc}).Graph(nil)
	if err != nil {
		return err
	}
	r, err := flow.NewRunner(g, s, flow.Options{})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := s.Thread(ctx, "net"); errors.Is(err, store.ErrNotFound) {
		_, err = r.Invoke(ctx, "net", agent.Input("Write a short report"))
		return err
	}
	_, err = r.Resume(ctx, "net", nil)
	return err
}

// TestNetworkCrashResume kills a 3-agent network with SIGKILL during the
// second agent's model call and resumes it in a new process: the first
// agent's model call is not repeated and the final state equals an
// uninterrupted run's.
func TestNetworkCrashResume(t *testing.T) {
	crashtest.RunChild("CAIRN_NET_CHILD", func() error {
		return networkChild(os.Getenv("CAIRN_NET_DB"), os.Getenv("CAIRN_NET_LOG"), os.Getenv("CAIRN_NET_PROC"))
	})
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	db, logPath := filepath.Join(dir, "net.db"), filepath.Join(dir, "calls.log")
	start := func(proc string) *exec.Cmd {
		return crashtest.Start(t, "TestNetworkCrashResume", "CAIRN_NET_CHILD=1", "CAIRN_NET_DB="+db, "CAIRN_NET_LOG="+logPath, "CAIRN_NET_PROC="+proc)
	}
	first := start("p1")
	// Kill once the writer's model call has started (its reply is delayed).
	crashtest.WaitFor(t, 20*time.Second, "the writer's model call", func() bool { return crashtest.FileContains(logPath, " writer ") })
	time.Sleep(50 * time.Millisecond)
	if killed, err := crashtest.Kill(first); !killed {
		t.Fatalf("first child was not killed: %v", err)
	}
	if err := start("p2").Wait(); err != nil {
		t.Fatalf("resume: %v", err)
	}

	// Model calls: researcher once (before the kill), writer twice (the
	// call in flight, then again), editor once.
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	calls := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		calls[fields[1]] = append(calls[fields[1]], fields[0])
	}
	if got := calls["researcher"]; len(got) != 1 || got[0] != "p1" {
		t.Fatalf("researcher calls %v: a completed model call ran again", got)
	}
	if got := calls["writer"]; len(got) != 2 || got[0] != "p1" || got[1] != "p2" {
		t.Fatalf("writer calls %v", got)
	}
	if got := calls["editor"]; len(got) != 1 || got[0] != "p2" {
		t.Fatalf("editor calls %v", got)
	}

	// The final state equals an uninterrupted run's.
	s, err := sqlite.OpenStore(context.Background(), db, sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	crashed, err := s.Load(context.Background(), store.LoadRequest{Thread: "net"})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := scripted.Parse("three.yaml", []byte(threeAgents))
	g, err := threeAgentNetwork(m).Graph(nil)
	if err != nil {
		t.Fatal(err)
	}
	// An uninterrupted run of the same thread id, in a second store.
	ref, err := sqlite.OpenStore(context.Background(), filepath.Join(dir, "ref.db"), sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	rr, _ := flow.NewRunner(g, ref, flow.Options{})
	want, err := rr.Invoke(context.Background(), "net", agent.Input("Write a short report"))
	if err != nil {
		t.Fatal(err)
	}
	if crashed.State.String() != want.State.String() {
		t.Fatalf("final state differs:\n got %s\nwant %s", crashed.State, want.State)
	}
}
