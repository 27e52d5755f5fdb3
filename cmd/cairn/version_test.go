package main

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	stamped := &debug.BuildInfo{Main: debug.Module{Path: "github.com/cairn-dev/cairn", Version: "v0.3.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-11-22T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want buildVersion
	}{
		{"stamped", stamped, true, buildVersion{Module: "github.com/cairn-dev/cairn", Version: "v0.3.0", Commit: "abc123", Time: "2026-11-22T10:00:00Z", Modified: true, Go: runtime.Version()}},
		{"checkout", &debug.BuildInfo{Main: debug.Module{Path: "github.com/cairn-dev/cairn", Version: "(devel)"}}, true, buildVersion{Module: "github.com/cairn-dev/cairn", Version: "(devel)", Go: runtime.Version()}},
		{"no build info", nil, false, buildVersion{Module: "github.com/cairn-dev/cairn", Version: "(unknown)", Go: runtime.Version()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionOf(tc.bi, tc.ok); got != tc.want {
				t.Fatalf("versionOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	code, out, errOut := cli(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "cairn ") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("version: %d %q %q", code, out, errOut)
	}
	code, out, _ = cli(t, nil, "version", "--json")
	var v buildVersion
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Go != runtime.Version() || v.Module == "" {
		t.Fatalf("version --json: %d %s", code, out)
	}
	if code, _, _ := cli(t, nil, "version", "extra"); code != 2 {
		t.Fatalf("version with an argument: exit %d, want 2", code)
	}
}
