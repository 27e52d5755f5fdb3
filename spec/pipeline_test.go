package spec_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/spec"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/memory"
)

func pipelineDir(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("..", "examples", "test-pipeline"))); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dst, ".state"))
	return dst
}

func readGate(t *testing.T, p *spec.Pipeline, n int) spec.GateFile {
	t.Helper()
	b, err := os.ReadFile(p.GateFilePath(n))
	if err != nil {
		t.Fatal(err)
	}
	var g spec.GateFile
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func readPipelineFile(t *testing.T, p *spec.Pipeline) spec.PipelineFile {
	t.Helper()
	b, err := os.ReadFile(p.PipelineFilePath())
	if err != nil {
		t.Fatal(err)
	}
	var pf spec.PipelineFile
	if err := json.Unmarshal(b, &pf); err != nil {
		t.Fatal(err)
	}
	return pf
}

func TestPipelineRun(t *testing.T) {
	dir := pipelineDir(t)
	p, err := spec.LoadPipeline(filepath.Join(dir, "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := filepath.Base(p.GateFilePath(1)); got != "demoqa_com-student_registration-gate1-output.json" {
		t.Fatalf("gate file name %s", got)
	}
	res, err := spec.RunPipeline(context.Background(), p, spec.PipelineConfig{Store: memory.Open(store.Options{}), Thread: "pipe"})
	if err != nil {
		t.Fatal(err)
	}
	pf := readPipelineFile(t, p)
	if pf.Status != "SUCCESS" || pf.CurrentGate != 4 || len(pf.CompletedGates) != 4 || pf.Metadata.UserStory == "" || len(pf.Metadata.AcceptanceCriteria) != 2 {
		t.Fatalf("pipeline file %+v (result %+v)", pf, res.Pipeline)
	}
	g1 := readGate(t, p, 1)
	if g1.Gate != 1 || g1.Agent != "TestCaseDesigner" || g1.Status != "SUCCESS" || g1.Metadata.Domain != "demoqa_com" || g1.Metadata.URL == "" ||
		g1.Validation.Score != 95 || !g1.Validation.Passed {
		t.Fatalf("gate 1 %+v", g1)
	}
	g2 := readGate(t, p, 2)
	if g2.Validation.Score != 87 || len(g2.Validation.Issues) != 1 || g2.Status != "SUCCESS" {
		t.Fatalf("gate 2 %+v", g2)
	}
	// No secrets in any file.
	entries, _ := os.ReadDir(filepath.Join(dir, ".state"))
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, ".state", e.Name()))
		if strings.Contains(string(b), "hunter2") || strings.Contains(string(b), "sk-live") {
			t.Fatalf("%s leaks a secret:\n%s", e.Name(), b)
		}
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, g1.Output)
	if !strings.Contains(compact.String(), `"password":"[REDACTED]"`) || !strings.Contains(compact.String(), `"apiKey":"[REDACTED]"`) {
		t.Fatalf("gate 1 output %s", g1.Output)
	}
	if len(res.Gates) != 4 {
		t.Fatalf("result gates %d", len(res.Gates))
	}
}

func TestPipelineCrashAtGate3AndResume(t *testing.T) {
	dir := pipelineDir(t)
	replies := filepath.Join(dir, "replies", "pom-agent.yaml")
	good, _ := os.ReadFile(replies)
	if err := os.WriteFile(replies, []byte("replies:\n  - step: output\n    error: {status: 500, message: compiler crashed}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := spec.LoadPipeline(filepath.Join(dir, "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := memory.Open(store.Options{})
	_, err = spec.RunPipeline(context.Background(), p, spec.PipelineConfig{Store: s, Thread: "pipe"})
	if err == nil || !strings.Contains(err.Error(), "compiler crashed") {
		t.Fatalf("gate 3 failure: %v", err)
	}
	if g3 := readGate(t, p, 3); g3.Status != "FAILED" || len(g3.Validation.Issues) == 0 {
		t.Fatalf("gate 3 file %+v", g3)
	}
	if pf := readPipelineFile(t, p); pf.Status != "FAILED" || pf.CurrentGate != 3 || len(pf.CompletedGates) != 2 {
		t.Fatalf("pipeline file %+v", pf)
	}
	// Fix gate 3; damage gate 2's file on disk: gate 3 is warned and falls
	// back to the pipeline input; gates 1 and 2 do not run again.
	os.WriteFile(replies, good, 0o644)
	os.WriteFile(p.GateFilePath(2), []byte("{not json"), 0o644)
	var warnings []string
	res, err := spec.RunPipeline(context.Background(), p, spec.PipelineConfig{Store: s, Thread: "pipe", Warn: func(w string) { warnings = append(warnings, w) }})
	if err != nil {
		t.Fatal(err)
	}
	if pf := readPipelineFile(t, p); pf.Status != "SUCCESS" || len(pf.CompletedGates) != 4 {
		t.Fatalf("pipeline after resume %+v", pf)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "not valid JSON") {
		t.Fatalf("warnings %v", warnings)
	}
	runs := map[string]int{}
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: "pipe"}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range cp.Nodes {
			runs[n+":"+cp.Status.String()]++
		}
	}
	if runs["gate1:SUCCESS"] != 1 || runs["gate2:SUCCESS"] != 1 || runs["gate3:FAILED"] != 1 || runs["gate3:SUCCESS"] != 1 || runs["gate4:SUCCESS"] != 1 {
		t.Fatalf("gate runs %v", runs)
	}
	if res.Pipeline.Status != "SUCCESS" {
		t.Fatalf("result %+v", res.Pipeline)
	}
	// Running a finished pipeline again changes nothing.
	if _, err := spec.RunPipeline(context.Background(), p, spec.PipelineConfig{Store: s, Thread: "pipe"}); err != nil {
		t.Fatal(err)
	}
}

func TestPipelineGoSteps(t *testing.T) {
	dir := t.TempDir()
	src := `name: counted
metadata: {domain: "Example.COM", feature: "Count  it!!"}
gates:
  - {gate: 0, name: Counter, step: count, threshold: 50}
  - {gate: 1, name: Doubler, step: double, threshold: 50}
`
	path := filepath.Join(dir, "p.yaml")
	os.WriteFile(path, []byte(src), 0o644)
	p, err := spec.LoadPipeline(path)
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]spec.GateStep{
		"count": func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"n":21}`), nil
		},
		"double": func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
			var v struct{ N int }
			json.Unmarshal(in, &v)
			b, _ := json.Marshal(map[string]int{"n": v.N * 2})
			return b, nil
		},
	}
	if _, err := spec.RunPipeline(context.Background(), p, spec.PipelineConfig{Store: memory.Open(store.Options{}), Thread: "c", Steps: steps}); err != nil {
		t.Fatal(err)
	}
	var out struct{ N int }
	g := readGate(t, p, 1)
	if json.Unmarshal(g.Output, &out) != nil || out.N != 42 || filepath.Base(p.GateFilePath(1)) != "example_com-count_it_-gate1-output.json" {
		t.Fatalf("gate 1 %+v at %s", g, p.GateFilePath(1))
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"demoqa.com":            "demoqa_com",
		"Student Registration":  "student_registration",
		"a//b..c":               "a_b_c",
		"Ünïcode-ok_1":          "_n_code-ok_1",
		strings.Repeat("x", 80): strings.Repeat("x", 50),
	} {
		if got := spec.Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPipelineErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"no gates", "name: x\nmetadata: {domain: a, feature: b}\n", "at least one gate"},
		{"no metadata", "name: x\ngates: [{gate: 1, step: s}]\n", "metadata.domain"},
		{"dup gate", "name: x\nmetadata: {domain: a, feature: b}\ngates:\n  - {gate: 1, step: s}\n  - {gate: 1, step: t}\n", "p.yaml:5: gate 1 appears twice"},
		{"both", "name: x\nmetadata: {domain: a, feature: b}\ngates:\n  - {gate: 1, step: s, agent: a.md}\n", "exactly one of agent: or step:"},
		{"threshold", "name: x\nmetadata: {domain: a, feature: b}\ngates:\n  - {gate: 1, step: s, threshold: 120}\n", "within 0–100"},
		{"unknown key", "name: x\ncolour: red\n", `p.yaml:2: unknown front-matter key "colour"`},
		{"order", "name: x\nmetadata: {domain: a, feature: b}\ngates:\n  - {gate: 2, step: s}\n  - {gate: 1, step: t}\n", "increasing order"},
		{"bad secret", "name: x\nmetadata: {domain: a, feature: b}\nsecrets: {patterns: ['(']}\ngates: [{gate: 1, step: s}]\n", "secrets:"},
	}
	for _, tc := range tests {
		_, err := spec.ParsePipeline("p.yaml", []byte(tc.src))
		if !errors.Is(err, spec.ErrSpec) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (want %q)", tc.name, err, tc.want)
		}
	}
}
