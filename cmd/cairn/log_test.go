package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// --log-level and --log-format put the run's records on stderr, never a
// state value; bad values are usage errors.
func TestLogFlags(t *testing.T) {
	dir := copyExample(t)
	file := filepath.Join(dir, "business-extract.md")
	store := "sqlite:" + filepath.Join(t.TempDir(), "s.db")
	code, _, errOut := cli(t, nil, "run", file, "--input-text", "Acme Anvils GmbH, Berlin", "--store", store, "--log-level", "debug", "--log-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	msgs := map[string]bool{}
	for _, line := range strings.Split(errOut, "\n") {
		var rec struct{ Msg, Level string }
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &rec) == nil {
			msgs[rec.Msg] = true
		}
	}
	for _, want := range []string{"store migrated", "run start", "step committed", "snapshot written", "run end"} {
		if !msgs[want] {
			t.Errorf("no %q record in:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "Berlin family firm") || strings.Contains(errOut, "Acme Anvils GmbH, Berlin") {
		t.Fatalf("a state value reached the log:\n%s", errOut)
	}
	code, _, errOut = cli(t, nil, "run", file, "--input-text", "x", "--store", store)
	if code != 0 || strings.Contains(errOut, "level=INFO") {
		t.Fatalf("the default level logs info records: %d\n%s", code, errOut)
	}
	for _, args := range [][]string{{"--log-level", "loud"}, {"--log-format", "xml"}} {
		if code, _, errOut := cli(t, nil, append([]string{"threads", "--store", store}, args...)...); code != 2 {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
	}
}
