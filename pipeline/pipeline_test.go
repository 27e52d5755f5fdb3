package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
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

func readGate(t *testing.T, p *pipeline.Pipeline, thread string, n int) pipeline.GateFile {
	t.Helper()
	b, err := os.ReadFile(p.GateFilePath(thread, n))
	if err != nil {
		t.Fatal(err)
	}
	var g pipeline.GateFile
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func readPipelineFile(t *testing.T, p *pipeline.Pipeline, thread string) pipeline.File {
	t.Helper()
	b, err := os.ReadFile(p.PipelineFilePath(thread))
	if err != nil {
		t.Fatal(err)
	}
	var pf pipeline.File
	if err := json.Unmarshal(b, &pf); err != nil {
		t.Fatal(err)
	}
	return pf
}

func TestPipelineRun(t *testing.T) {
	dir := pipelineDir(t)
	p, err := pipeline.Load(filepath.Join(dir, "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.GateFilePath("pipe", 1); got != filepath.Join(dir, ".state", "pipe", "demoqa_com-student_registration-gate1-output.json") {
		t.Fatalf("gate file path %s", got)
	}
	s := inmem.Open(store.Options{})
	res, err := pipeline.Run(context.Background(), p, pipeline.Config{Store: s, Thread: "pipe"})
	if err != nil {
		t.Fatal(err)
	}
	// The first gate gets the request as the seed passes it to agents.
	in, err := s.Load(context.Background(), store.LoadRequest{Thread: "pipe", Namespace: "gate1"})
	if err != nil {
		t.Fatal(err)
	}
	var gateIn agentfile.Input
	if err := in.State.Get("input", &gateIn); err != nil || !strings.Contains(string(gateIn.Content), `"metadata":{"domain":"demoqa_com","feature":"student_registration"}`) ||
		!strings.Contains(string(gateIn.Content), `"userStory":"As a student`) || !strings.Contains(string(gateIn.Content), `"acceptanceCriteria":[`) {
		t.Fatalf("gate 1 input %s %v", gateIn.Content, err)
	}
	pf := readPipelineFile(t, p, "pipe")
	if pf.Status != "SUCCESS" || pf.CurrentGate != 4 || len(pf.CompletedGates) != 4 || pf.Metadata.UserStory == "" || len(pf.Metadata.AcceptanceCriteria) != 2 {
		t.Fatalf("pipeline file %+v (result %+v)", pf, res.Pipeline)
	}
	// The seed writes the sanitized domain and feature in the pipeline file.
	if pf.Metadata.Domain != "demoqa_com" || pf.Metadata.Feature != "student_registration" || pf.Metadata.URL != "https://demoqa.com/automation-practice-form" {
		t.Fatalf("pipeline metadata %+v", pf.Metadata)
	}
	g1 := readGate(t, p, "pipe", 1)
	if g1.Gate != 1 || g1.Agent != "TestCaseDesigner" || g1.Status != "SUCCESS" || g1.Metadata.Domain != "demoqa_com" || g1.Metadata.URL == "" ||
		g1.Validation.Score != 95 || !g1.Validation.Passed {
		t.Fatalf("gate 1 %+v", g1)
	}
	g2 := readGate(t, p, "pipe", 2)
	if g2.Validation.Score != 87 || len(g2.Validation.Issues) != 1 || g2.Status != "SUCCESS" {
		t.Fatalf("gate 2 %+v", g2)
	}
	// No secrets in any file.
	entries, _ := os.ReadDir(p.StateDirOf("pipe"))
	if len(entries) != 5 {
		t.Fatalf("state files %v", entries)
	}
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(p.StateDirOf("pipe"), e.Name()))
		if strings.Contains(string(b), "hunter2") || strings.Contains(string(b), "sk-live") {
			t.Fatalf("%s leaks a secret:\n%s", e.Name(), b)
		}
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, g1.Output)
	if !strings.Contains(compact.String(), `"password":"[REDACTED]"`) || !strings.Contains(compact.String(), `"apiKey":"[REDACTED]"`) {
		t.Fatalf("gate 1 output %s", g1.Output)
	}
	if len(res.Gates) != 4 || res.Pipeline.Status != "SUCCESS" {
		t.Fatalf("result %+v", res)
	}
}

// gateRuns counts the root steps of a pipeline thread by node and status.
func gateRuns(t *testing.T, s store.Store, thread string) map[string]int {
	t.Helper()
	runs := map[string]int{}
	for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: thread}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range cp.Nodes {
			runs[n+":"+cp.Status.String()]++
		}
	}
	return runs
}

func TestPipelineCrashAtGate3AndResume(t *testing.T) {
	dir := pipelineDir(t)
	replies := filepath.Join(dir, "replies", "pom-agent.yaml")
	good, _ := os.ReadFile(replies)
	if err := os.WriteFile(replies, []byte("replies:\n  - step: output\n    error: {status: 500, message: compiler crashed}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Load(filepath.Join(dir, "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := inmem.Open(store.Options{})
	ctx := context.Background()
	var reports []pipeline.GateReport
	onGate := func(r pipeline.GateReport) { reports = append(reports, r) }
	_, err = pipeline.Run(ctx, p, pipeline.Config{Store: s, Thread: "pipe", OnGate: onGate})
	if err == nil || !strings.Contains(err.Error(), "compiler crashed") {
		t.Fatalf("gate 3 failure: %v", err)
	}
	if g3 := readGate(t, p, "pipe", 3); g3.Status != "FAILED" || len(g3.Validation.Issues) == 0 || g3.Agent != "POMAgent" || string(g3.Output) != "null" {
		t.Fatalf("gate 3 file %+v", g3)
	}
	if pf := readPipelineFile(t, p, "pipe"); pf.Status != "FAILED" || pf.CurrentGate != 3 || len(pf.CompletedGates) != 2 {
		t.Fatalf("pipeline file %+v", pf)
	}
	if len(reports) != 3 || reports[2].File.Status != "FAILED" || reports[1].File.Validation.Score != 87 {
		t.Fatalf("gate reports %+v", reports)
	}
	// Fix gate 3 and damage gate 2's file on disk: gate 3's input comes
	// from the committed state, not from the file; gates 1 and 2 do not run
	// again.
	os.WriteFile(replies, good, 0o644)
	os.WriteFile(p.GateFilePath("pipe", 2), []byte("{not json"), 0o644)
	var warnings []string
	res, err := pipeline.Run(ctx, p, pipeline.Config{Store: s, Thread: "pipe", Warn: func(w string) { warnings = append(warnings, w) }})
	if err != nil {
		t.Fatal(err)
	}
	if pf := readPipelineFile(t, p, "pipe"); pf.Status != "SUCCESS" || len(pf.CompletedGates) != 4 {
		t.Fatalf("pipeline after resume %+v", pf)
	}
	if g2 := readGate(t, p, "pipe", 2); g2.Status != "SUCCESS" {
		t.Fatalf("gate 2 file not rewritten from the store: %+v", g2)
	}
	if len(warnings) != 0 {
		t.Fatalf("warnings %v", warnings)
	}
	in, err := s.Load(ctx, store.LoadRequest{Thread: "pipe", Namespace: "gate3"})
	if err != nil {
		t.Fatal(err)
	}
	var gateIn agentfile.Input
	if err := in.State.Get("input", &gateIn); err != nil || !strings.Contains(string(gateIn.Content), "elementMappings") {
		t.Fatalf("gate 3 input %s %v", gateIn.Content, err)
	}
	runs := gateRuns(t, s, "pipe")
	if runs["gate1:SUCCESS"] != 1 || runs["gate2:SUCCESS"] != 1 || runs["gate3:FAILED"] != 1 || runs["gate3:SUCCESS"] != 1 || runs["gate4:SUCCESS"] != 1 {
		t.Fatalf("gate runs %v", runs)
	}
	if res.Pipeline.Status != "SUCCESS" {
		t.Fatalf("result %+v", res.Pipeline)
	}
	// A finished pipeline is not run again: it says so.
	_, err = pipeline.Run(ctx, p, pipeline.Config{Store: s, Thread: "pipe"})
	var fin *pipeline.FinishedError
	if !errors.Is(err, pipeline.ErrFinished) || !errors.As(err, &fin) || fin.Status != "SUCCESS" {
		t.Fatalf("second run: %v", err)
	}
	if got := gateRuns(t, s, "pipe"); !reflect.DeepEqual(got, runs) {
		t.Fatalf("second run changed history: %v", got)
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
	p, err := pipeline.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]pipeline.GateStep{
		"count": func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"n":21,"note":"<b> & </b>","q":"\\u003c"}`), nil
		},
		"double": func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
			var v struct{ N int }
			json.Unmarshal(in, &v)
			b, _ := json.Marshal(map[string]int{"n": v.N * 2})
			return b, nil
		},
	}
	if _, err := pipeline.Run(context.Background(), p, pipeline.Config{Store: inmem.Open(store.Options{}), Thread: "c", Steps: steps}); err != nil {
		t.Fatal(err)
	}
	var out struct{ N int }
	g := readGate(t, p, "c", 1)
	if json.Unmarshal(g.Output, &out) != nil || out.N != 42 || filepath.Base(p.GateFilePath("c", 1)) != "example_com-count_it_-gate1-output.json" {
		t.Fatalf("gate 1 %+v at %s", g, p.GateFilePath("c", 1))
	}
	// Gate files are JSON as people read it: no \u003c for <, > and &.
	b, _ := os.ReadFile(p.GateFilePath("c", 0))
	if !strings.Contains(string(b), `"note": "<b> & </b>"`) || !strings.Contains(string(b), `"q": "\\u003c"`) || bytes.Contains(b, []byte(`\u0026`)) {
		t.Fatalf("gate 0 file escapes HTML:\n%s", b)
	}
	// A registered step is required before anything runs.
	s := inmem.Open(store.Options{})
	_, err = pipeline.Run(context.Background(), p, pipeline.Config{Store: s, Thread: "d"})
	if !errors.Is(err, agentfile.ErrInvalidFile) || !strings.Contains(err.Error(), `no registered step "count"`) {
		t.Fatalf("missing step: %v", err)
	}
	if _, err := s.Load(context.Background(), store.LoadRequest{Thread: "d"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused pipeline stored something: %v", err)
	}
}

// TestPipelineThreadsKeepTheirFiles runs one pipeline on two threads, then
// forks the first before gate 3 into a third and resumes it: each thread
// has its own folder, the fork does not run gates 1 and 2 again, and its
// files match its store.
func TestPipelineThreadsKeepTheirFiles(t *testing.T) {
	dir := pipelineDir(t)
	p, err := pipeline.Load(filepath.Join(dir, "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	for _, th := range []string{"one", "two"} {
		if _, err := pipeline.Run(ctx, p, pipeline.Config{Store: s, Thread: th}); err != nil {
			t.Fatal(err)
		}
	}
	// Gate 3 of thread "one" read checkpoint 3 (input, gate1, gate2).
	var at int64
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: "one"}) {
		if err != nil {
			t.Fatal(err)
		}
		if len(cp.Nodes) == 1 && cp.Nodes[0] == "gate2" {
			at = cp.Seq
		}
	}
	if _, err := s.Fork(ctx, store.ForkRequest{Thread: "one", At: at, Into: "three"}); err != nil {
		t.Fatal(err)
	}
	var reports []pipeline.GateReport
	res, err := pipeline.Run(ctx, p, pipeline.Config{Store: s, Thread: "three", OnGate: func(r pipeline.GateReport) { reports = append(reports, r) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pipeline.Status != "SUCCESS" || len(reports) != 2 || reports[0].File.Gate != 3 || reports[1].File.Gate != 4 {
		t.Fatalf("fork ran %+v, result %+v", reports, res.Pipeline)
	}
	if runs := gateRuns(t, s, "three"); runs["gate1:SUCCESS"] != 0 || runs["gate3:SUCCESS"] != 1 || runs["gate4:SUCCESS"] != 1 {
		t.Fatalf("fork runs %v", runs)
	}
	for _, th := range []string{"one", "two", "three"} {
		exp := t.TempDir()
		if _, err := pipeline.ExportGateFiles(ctx, s, th, exp); err != nil {
			t.Fatal(err)
		}
		sameFiles(t, p.StateDirOf(th), exp)
	}
}

// sameFiles fails unless two folders hold the same files with equal JSON.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	ea, _ := os.ReadDir(a)
	eb, _ := os.ReadDir(b)
	if len(ea) != len(eb) {
		t.Fatalf("%s has %d files, %s %d", a, len(ea), b, len(eb))
	}
	for _, e := range ea {
		x, err1 := os.ReadFile(filepath.Join(a, e.Name()))
		y, err2 := os.ReadFile(filepath.Join(b, e.Name()))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Fatalf("%s differs:\n%s\n%s", e.Name(), x, y)
		}
	}
}

// TestPipelineForkWithinThread forks a finished pipeline thread in place
// before gate 2, with gate 1's output edited: gate 2 runs again on the new
// input instead of reusing its namespace's old run, and the gate files of
// the later gates follow the new branch.
func TestPipelineForkWithinThread(t *testing.T) {
	dir := t.TempDir()
	src := `name: fw
metadata: {domain: d, feature: f}
gates:
  - {gate: 1, name: First, step: first}
  - {gate: 2, name: Second, step: second}
`
	path := filepath.Join(dir, "p.yaml")
	os.WriteFile(path, []byte(src), 0o644)
	p, err := pipeline.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	steps := map[string]pipeline.GateStep{
		"first": func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"v":"a"}`), nil
		},
		"second": func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
			seen = append(seen, string(in))
			return in, nil
		},
	}
	ctx := context.Background()
	s := inmem.Open(store.Options{})
	cfg := pipeline.Config{Store: s, Thread: "t", Steps: steps}
	if _, err := pipeline.Run(ctx, p, cfg); err != nil {
		t.Fatal(err)
	}
	patch := state.Patch{{Op: state.OpReplace, Path: "/gates/1/output", Value: json.RawMessage(`{"v":"b"}`)}}
	if _, err := s.Fork(ctx, store.ForkRequest{Thread: "t", At: 2, Patch: patch}); err != nil {
		t.Fatal(err)
	}
	res, err := pipeline.Run(ctx, p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[1] != `{"v":"b"}` || string(res.Gates[2].Output) != `{"v":"b"}` {
		t.Fatalf("gate 2 inputs %v, result %+v", seen, res.Gates[2])
	}
	var c bytes.Buffer
	if g := readGate(t, p, "t", 2); json.Compact(&c, g.Output) != nil || c.String() != `{"v":"b"}` {
		t.Fatalf("gate 2 file %s", g.Output)
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
		if got := pipeline.Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPipelineErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
		is              error
	}{
		{"empty", "", "p.yaml: pipeline file is empty", pipeline.ErrEmpty},
		{"comments only", "# nothing\n", "p.yaml: pipeline file is empty", pipeline.ErrEmpty},
		{"no gates", "name: x\nmetadata: {domain: a, feature: b}\n", "at least one gate", nil},
		{"no metadata", "name: x\ngates: [{gate: 1, step: s}]\n", "metadata.domain", nil},
		{"dup gate", "name: x\nmetadata: {domain: a, feature: b}\ngates:\n  - {gate: 1, step: s}\n  - {gate: 1, step: t}\n", "p.yaml:5: gate 1 appears twice", nil},
		{"both", "name: x\nmetadata: {domain: a, feature: b}\ngates:\n  - {gate: 1, step: s, agent: a.md}\n", "exactly one of agent: or step:", nil},
		{"threshold", "name: x\nmetadata: {domain: a, feature: b}\ngates:\n  - {gate: 1, step: s, threshold: 120}\n", "within 0–100", nil},
		{"unknown key", "name: x\ncolour: red\n", `p.yaml:2: unknown pipeline key "colour"`, nil},
		{"order", "name: x\nmetadata: {domain: a, feature: b}\ngates:\n  - {gate: 2, step: s}\n  - {gate: 1, step: t}\n", "increasing order", nil},
		{"bad secret", "name: x\nmetadata: {domain: a, feature: b}\nsecrets: {patterns: ['(']}\ngates: [{gate: 1, step: s}]\n", "secrets:", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pipeline.Parse("p.yaml", []byte(tc.src))
			if !errors.Is(err, agentfile.ErrInvalidFile) || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("%v (want %q)", err, tc.want)
			}
		})
	}
}

// TestPipelineSecretsDefaults: secrets: adds to the default keys and
// shapes; defaults: false turns them off.
func TestPipelineSecretsDefaults(t *testing.T) {
	base := "name: x\nmetadata: {domain: a, feature: b}\ngates: [{gate: 1, step: s}]\n"
	in := `{"password":"pw1","note":"sk-abcdefghijklmnopqrstu","code":"ACME-42"}`
	for _, tc := range []struct{ name, secrets, want string }{
		{"defaults", "", `{"code":"ACME-42","note":"[REDACTED]","password":"[REDACTED]"}`},
		{"added", "secrets: {patterns: ['ACME-[0-9]+']}\n", `{"code":"[REDACTED]","note":"[REDACTED]","password":"[REDACTED]"}`},
		{"off", "secrets: {defaults: false, keys: [code]}\n", `{"code":"[REDACTED]","note":"sk-abcdefghijklmnopqrstu","password":"pw1"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pipeline.Parse("p.yaml", []byte(base+tc.secrets))
			if err != nil {
				t.Fatal(err)
			}
			var v any
			json.Unmarshal(p.Redactor().JSON([]byte(in)), &v)
			got, _ := json.Marshal(v)
			if string(got) != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestPipelineRedactsAPIKeyValue: a model that repeats the gate agent's API
// key (a value with no secret shape, known only from the environment) does
// not get it into the store or the gate files.
func TestPipelineRedactsAPIKeyValue(t *testing.T) {
	const apiKey = "plainvalue-7f3c9a2e"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop",`+
			`"message":{"role":"assistant","content":"{\"echo\":\"my key is `+apiKey+`\"}"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.md"), []byte("---\nname: echo\nmodel: {provider: openai-compatible, base_url: \""+srv.URL+"/v1\", api_key_env: CAIRN_TEST_KEY, model_name: m}\n"+
		"chain: [{id: out, kind: structured, output_schema: O}]\nschemas:\n  O: {type: object}\n---\n## step:out\nEcho.\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("name: k\nmetadata: {domain: d, feature: f}\ngates: [{gate: 1, name: Echo, agent: a.md}]\n"), 0o644)
	p, err := pipeline.Load(filepath.Join(dir, "p.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := inmem.Open(store.Options{})
	getenv := func(k string) string { return map[string]string{"CAIRN_TEST_KEY": apiKey}[k] }
	res, err := pipeline.Run(context.Background(), p, pipeline.Config{Store: s, Thread: "k", Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Gates[1].Output), "my key is [REDACTED]") {
		t.Fatalf("gate 1 output %s", res.Gates[1].Output)
	}
	for _, ns := range []string{"", "gate1"} {
		for cp, err := range s.History(context.Background(), store.HistoryRequest{Thread: "k", Namespace: ns, WithState: true}) {
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(cp.State.String(), apiKey) {
				t.Fatalf("namespace %q checkpoint %d holds the key: %s", ns, cp.Seq, cp.State)
			}
		}
	}
	b, _ := os.ReadFile(p.GateFilePath("k", 1))
	if len(b) == 0 || strings.Contains(string(b), apiKey) {
		t.Fatalf("gate file:\n%s", b)
	}
}

// TestLongPipeline: a pipeline is a line of gates and cannot loop, so the
// runner's default step limit must not stop one with more gates than that.
func TestLongPipeline(t *testing.T) {
	const gates = flow.DefaultRecursionLimit + 5
	var src strings.Builder
	src.WriteString("name: long\nmetadata: {domain: example.com, feature: long}\ngates:\n")
	for i := 1; i <= gates; i++ {
		fmt.Fprintf(&src, "  - {gate: %d, name: Inc%d, step: inc, threshold: 50}\n", i, i)
	}
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	inc := func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		var v struct{ N int }
		_ = json.Unmarshal(in, &v) // the first gate's input is the request
		return json.Marshal(map[string]int{"n": v.N + 1})
	}
	res, err := pipeline.Run(context.Background(), p, pipeline.Config{Store: inmem.Open(store.Options{}), Thread: "l", Steps: map[string]pipeline.GateStep{"inc": inc}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pipeline.Status != "SUCCESS" || len(res.Pipeline.CompletedGates) != gates {
		t.Fatalf("pipeline %s with %d of %d gates completed", res.Pipeline.Status, len(res.Pipeline.CompletedGates), gates)
	}
	var out struct{ N int }
	if g := readGate(t, p, "l", gates); json.Unmarshal(g.Output, &out) != nil || out.N != gates {
		t.Fatalf("last gate output %s, want n=%d", g.Output, gates)
	}
}

// TestPipelineRemovesKilledWritersTemps: a writer killed between creating
// its temporary file and renaming it leaves the temporary file behind; the
// next writer of the thread's folder removes it.
func TestPipelineRemovesKilledWritersTemps(t *testing.T) {
	dir := pipelineDir(t)
	p, err := pipeline.Load(filepath.Join(dir, "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	stateDir := p.StateDirOf("t")
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(stateDir, ".demoqa_com-student_registration-gate2-output.json.12345.tmp")
	if err := os.WriteFile(stale, []byte("{half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Run(context.Background(), p, pipeline.Config{Store: inmem.Open(store.Options{}), Thread: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the killed writer's temporary file is still there (%v)", err)
	}
}
