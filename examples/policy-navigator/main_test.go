package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

func TestPolicyNavigator(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "p.db")
	var out bytes.Buffer
	if err := run(context.Background(), &out, url, "replies.yaml", filepath.Join(dir, "logs")); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"[POLICY_INTERPRETER] The housing policy grants rent support", "[ELIGIBILITY_VERIFIER] At 67 you qualify", "(4 messages)"} {
		if !strings.Contains(got, want) {
			t.Fatalf("output lacks %q:\n%s", want, got)
		}
	}
	s, err := store.Open(context.Background(), url, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cp, err := s.Load(context.Background(), store.LoadRequest{Thread: "citizen-1"})
	if err != nil {
		t.Fatal(err)
	}
	// The second turn remembered the first: the interpreted policy stayed in
	// the main state and reached the eligibility subgraph.
	var policy string
	if err := cp.State.Get("interpreted_policy", &policy); err != nil || !strings.Contains(policy, "rent support") {
		t.Fatalf("interpreted_policy %q %v", policy, err)
	}
	elig, err := s.Load(context.Background(), store.LoadRequest{Thread: "citizen-1", Namespace: "eligibility:" + nsSeq(t, s)})
	if err != nil || !strings.Contains(elig.State.String(), `"policy":"The housing policy`) || elig.State.Has("messages") {
		t.Fatalf("eligibility subgraph state %s %v", elig.State, err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "logs"))
	if len(entries) == 0 {
		t.Fatal("no session log")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "logs", entries[len(entries)-1].Name()))
	var log struct {
		ThreadID string            `json:"thread_id"`
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(b, &log); err != nil || log.ThreadID != "citizen-1" || len(log.Messages) < 2 {
		t.Fatalf("session log %s %v", b, err)
	}
}

// nsSeq finds the seq the eligibility step read (its subgraph namespace).
func nsSeq(t *testing.T, s store.Store) string {
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: "citizen-1"}) {
		if err != nil {
			t.Fatal(err)
		}
		if len(cp.Nodes) == 1 && cp.Nodes[0] == "eligibility" {
			return strings.TrimSpace(itoa(cp.Parent))
		}
	}
	t.Fatal("no eligibility step")
	return ""
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
