package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/replay"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// readerDir copies testdata/reader (an agent file with a tool, its
// script and its notes) into a new folder and returns it.
func readerDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "reader"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// recorded makes a folder with the agent file, its script and the notes,
// runs the agent once on thread "t1" of a SQLite store and returns the
// store and the agent file's path.
func recorded(t *testing.T) (store.Store, string) {
	t.Helper()
	dir := readerDir(t)
	s, err := sqlite.OpenStore(context.Background(), filepath.Join(dir, "cairn.db"), sqlite.Options{}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	path := filepath.Join(dir, "reader.md")
	a := load(t, path)
	if _, err := a.Run(context.Background(), runs.RunSpec{Store: s, Thread: "t1", Input: json.RawMessage(`"go"`)}); err != nil {
		t.Fatal(err)
	}
	return s, path
}

func load(t *testing.T, path string) runs.Assistant {
	t.Helper()
	a, err := runs.LoadAssistant(path, runs.AssistantConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestReplayMatches(t *testing.T) {
	s, path := recorded(t)
	rep, err := replay.Thread(context.Background(), s, "t1", replay.Options{Assistant: load(t, path)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Matched || rep.Departure != nil || rep.Checkpoints < 2 || rep.Calls < 3 {
		t.Fatalf("report: %s", rep.MarshalIndent())
	}
}

func TestReplayPromptChanged(t *testing.T) {
	s, path := recorded(t)
	edit(t, path, "Read notes.txt and say what it holds.", "Read notes.txt and summarise it.")
	rep, err := replay.Thread(context.Background(), s, "t1", replay.Options{Assistant: load(t, path)})
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Departure
	if rep.Matched || d == nil || d.Call == nil {
		t.Fatalf("report: %s", rep.MarshalIndent())
	}
	if d.Seq != 2 || d.Call.Kind != "model" || d.Call.Index != 0 || !strings.Contains(string(mustJSON(d.Call.Diff)), "summarise") {
		t.Fatalf("departure: %s", mustJSON(d))
	}
}

func TestReplayRefusals(t *testing.T) {
	s, path := recorded(t)
	a := load(t, path)
	cases := []struct {
		name   string
		thread string
		opts   replay.Options
		want   error
	}{
		{"no thread", "nope", replay.Options{Assistant: a}, store.ErrNotFound},
		{"no assistant", "t1", replay.Options{}, store.ErrInvalidArgument},
		{"from off the branch", "t1", replay.Options{Assistant: a, From: 99}, store.ErrInvalidArgument},
		{"into itself", "t1", replay.Options{Assistant: a, Into: "t1"}, store.ErrInvalidArgument},
		{"into an existing thread", "t1", replay.Options{Assistant: a, Into: "t2"}, store.ErrConflict},
	}
	if _, err := s.CreateThread(context.Background(), store.Thread{ID: "t2"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := replay.Thread(context.Background(), s, c.thread, c.opts); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s holds no %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
