package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/replay"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/store/sqlite"
)

func asIs(c string) string { return c }

// recordWeather records the weather graph on thread t1 of an in-memory
// store.
func recordWeather(t *testing.T) store.Store {
	t.Helper()
	s := inmem.Open(store.Options{})
	if _, err := weather(asIs).Run(context.Background(), runs.RunSpec{Store: s, Thread: "t1", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReplayFrom(t *testing.T) {
	s := recordWeather(t)
	changed := weatherAsking("Which city, please?", asIs) // plan's prompt changed
	cases := []struct {
		name    string
		from    int64
		matched bool
		seq     int64
	}{
		{"from the start the changed prompt departs", 0, false, 2},
		{"from the plan's checkpoint the rest matches", 2, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := replay.Thread(context.Background(), s, "t1", replay.Options{Assistant: changed, From: c.from})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Matched != c.matched || (!c.matched && rep.Departure.Seq != c.seq) {
				t.Fatalf("report: %s", rep.MarshalIndent())
			}
			if c.matched && rep.Checkpoints != 1 {
				t.Fatalf("compared %d checkpoints, want 1 (act's)", rep.Checkpoints)
			}
		})
	}
}

func TestReplayInto(t *testing.T) {
	ctx := context.Background()
	s := recordWeather(t)
	before := history(t, s, "t1")
	rep, err := replay.Thread(ctx, s, "t1", replay.Options{Assistant: weather(asIs), Into: "t1-branch"})
	if err != nil || !rep.Matched {
		t.Fatalf("report %s, err %v", rep.MarshalIndent(), err)
	}
	if after := history(t, s, "t1"); !bytes.Equal(before, after) {
		t.Fatalf("the replayed thread changed:\n%s\n%s", before, after)
	}
	branch := history(t, s, "t1-branch")
	if len(branch) == 0 || bytes.Count(branch, []byte("\n")) != bytes.Count(before, []byte("\n")) {
		t.Fatalf("the new thread holds:\n%s\nwant as many checkpoints as:\n%s", branch, before)
	}
	// Its steps recorded their calls too, so it can itself be replayed.
	if rep, err := replay.Thread(ctx, s, "t1-branch", replay.Options{Assistant: weather(asIs)}); err != nil || !rep.Matched {
		t.Fatalf("replaying the branch: %s, %v", rep.MarshalIndent(), err)
	}
}

// history is a thread's checkpoints (seq, nodes, status, state) and
// pending writes, one line each.
func history(t *testing.T, s store.Store, thread string) []byte {
	t.Helper()
	var b bytes.Buffer
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: thread, WithState: true}) {
		if err != nil {
			t.Fatal(err)
		}
		ws, err := s.Writes(context.Background(), thread, "", cp.Seq)
		if err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal([]any{cp.Seq, cp.Nodes, cp.Status, cp.State, len(ws)})
		b.Write(append(line, '\n'))
	}
	return b.Bytes()
}

func TestRecordedSecretRedacted(t *testing.T) {
	ctx := context.Background()
	dir := readerDir(t)
	const secret = "sk-live-4f9a8b7c6d5e4f3a2b1c"
	db := filepath.Join(dir, "cairn.db")
	s, err := sqlite.OpenStore(ctx, db, sqlite.Options{}, store.Options{NoCompression: true})
	if err != nil {
		t.Fatal(err)
	}
	a := load(t, filepath.Join(dir, "reader.md"))
	if _, err := a.Run(ctx, runs.RunSpec{Store: s, Thread: "t1", Input: json.RawMessage(`"my key is ` + secret + `"`)}); err != nil {
		t.Fatal(err)
	}
	ws, err := s.Writes(ctx, "t1", "", 1)
	if err != nil || len(ws) == 0 {
		t.Fatalf("no call records (%v)", err)
	}
	first := -1
	for i, w := range ws {
		if strings.HasSuffix(w.Task, "/call/0") {
			first = i
		}
	}
	if first < 0 || !bytes.Contains(ws[first].Update, []byte("my key is [")) {
		t.Fatalf("no record of the first call with the request's input, redacted: %v", ws)
	}
	rep, err := replay.Thread(ctx, s, "t1", replay.Options{Assistant: a})
	if err != nil || !rep.Matched {
		t.Fatalf("a redacted recording replays: %s, %v", rep.MarshalIndent(), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{db, db + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("4f9a8b7c6d5e4f3a")) {
			t.Fatalf("%s holds the secret", f)
		}
	}
}
