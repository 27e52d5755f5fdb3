package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestResearchAgent(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, "sqlite:"+filepath.Join(t.TempDir(), "r.db"), "."); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"research-final: stop reason final after 4 steps, success true, sources [abstract methods conclusions]",
		"final result: Storing per-step patches",
		"research-budget: stop reason budget_steps after 2 steps, success false, sources [abstract methods]",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("output lacks %q:\n%s", want, got)
		}
	}
}
