package main

import (
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// otlpServer is an OTLP/HTTP endpoint that keeps the spans and the names
// of the metrics it receives.
func otlpServer(t *testing.T) (*httptest.Server, func() []*tracepb.Span, func() map[string]bool) {
	t.Helper()
	var mu sync.Mutex
	var spans []*tracepb.Span
	metrics := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		var resp proto.Message
		switch r.URL.Path {
		case "/v1/traces":
			var req coltrace.ExportTraceServiceRequest
			if err != nil || proto.Unmarshal(body, &req) != nil {
				http.Error(w, "bad export", 400)
				return
			}
			for _, rs := range req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					spans = append(spans, ss.Spans...)
				}
			}
			resp = &coltrace.ExportTraceServiceResponse{}
		case "/v1/metrics":
			var req colmetric.ExportMetricsServiceRequest
			if err != nil || proto.Unmarshal(body, &req) != nil {
				http.Error(w, "bad export", 400)
				return
			}
			for _, rm := range req.ResourceMetrics {
				for _, sm := range rm.ScopeMetrics {
					for _, m := range sm.Metrics {
						metrics[m.Name] = true
					}
				}
			}
			resp = &colmetric.ExportMetricsServiceResponse{}
		default:
			http.Error(w, "unknown signal", 404)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(resp)
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []*tracepb.Span { mu.Lock(); defer mu.Unlock(); return spans },
		func() map[string]bool { mu.Lock(); defer mu.Unlock(); return maps.Clone(metrics) }
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v := kv.Value.GetStringValue(); v != "" {
				return v
			}
			return kv.Value.String()
		}
	}
	return ""
}

// An agent-file run with a tool call sends its spans to a real OTLP/HTTP
// endpoint: invoke_agent ⊃ invoke_workflow ⊃ step ⊃ chat and execute_tool,
// with the GenAI attributes, and the runner's metrics; without an endpoint
// nothing is sent.
func TestOTLPTraces(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"notes.txt": "remember the milk",
		"r.yaml":    "replies:\n  - tool_calls: [{name: list_files, args: {dir: .}}]\n  - text: \"The folder holds notes.txt.\"\n",
		"a.md":      "---\nname: lister\nmodel: {provider: scripted, script: r.yaml}\ntools: [list_files]\n---\n## Instructions\nList the folder.\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv, spans, metrics := otlpServer(t)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "CAIRN_STORE": "sqlite:" + filepath.Join(dir, "s.db")}
	mustCLI(t, env, "run", filepath.Join(dir, "a.md"), "--input-text", "go", "--thread", "traced")
	byName := map[string]*tracepb.Span{}
	byID := map[string]*tracepb.Span{}
	for _, s := range spans() {
		byName[strings.Fields(s.Name)[0]] = s
		byID[string(s.SpanId)] = s
	}
	parent := func(s *tracepb.Span) string {
		if p := byID[string(s.ParentSpanId)]; p != nil {
			return strings.Fields(p.Name)[0]
		}
		return ""
	}
	for name, want := range map[string]string{"invoke_agent": "", "invoke_workflow": "invoke_agent", "step": "invoke_workflow", "chat": "step", "execute_tool": "step"} {
		s := byName[name]
		if s == nil {
			t.Fatalf("no %s span among %d", name, len(spans()))
		}
		if got := parent(s); got != want {
			t.Errorf("%s's parent is %q, want %q", name, got, want)
		}
		if attr(s, "gen_ai.conversation.id") != "traced" {
			t.Errorf("%s: gen_ai.conversation.id %q", name, attr(s, "gen_ai.conversation.id"))
		}
	}
	for _, m := range []string{"cairn.commits", "cairn.step.duration", "cairn.commit.duration", "gen_ai.client.token.usage"} {
		if !metrics()[m] {
			t.Errorf("metric %s not exported (got %v)", m, metrics())
		}
	}
	chat, tool := byName["chat"], byName["execute_tool"]
	if attr(chat, "gen_ai.operation.name") != "chat" || attr(chat, "gen_ai.provider.name") != "scripted" || attr(chat, "gen_ai.usage.output_tokens") == "" {
		t.Errorf("chat attributes %v", chat.Attributes)
	}
	if tool.Name != "execute_tool list_files" || attr(tool, "gen_ai.tool.name") != "list_files" {
		t.Errorf("tool span %s %v", tool.Name, tool.Attributes)
	}
	if byName["invoke_agent"].Name != "invoke_agent lister" || attr(byName["invoke_agent"], "gen_ai.agent.name") != "lister" {
		t.Errorf("agent span %s %v", byName["invoke_agent"].Name, byName["invoke_agent"].Attributes)
	}
	if attr(byName["invoke_workflow"], "cairn.stop_reason") != "success" {
		t.Errorf("workflow attributes %v", byName["invoke_workflow"].Attributes)
	}
	if attr(chat, "gen_ai.output.messages") != "" {
		t.Error("message content on a span without the capture switch")
	}
	// With the capture switch, content goes on chat spans, redacted.
	env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
	mustCLI(t, env, "run", filepath.Join(dir, "a.md"), "--input-text", "go", "--thread", "captured")
	var outputs []string
	for _, s := range spans() {
		if strings.HasPrefix(s.Name, "chat") && attr(s, "gen_ai.conversation.id") == "captured" {
			outputs = append(outputs, attr(s, "gen_ai.output.messages"))
		}
	}
	if all := strings.Join(outputs, "\n"); !strings.Contains(all, "notes.txt") || strings.Contains(all, "hunter2hunter2") || !strings.Contains(all, "list_files") {
		t.Fatalf("captured content %q", outputs)
	}
	delete(env, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
	// No endpoint, no export; an unknown protocol is refused.
	n := len(spans())
	delete(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
	mustCLI(t, env, "run", filepath.Join(dir, "a.md"), "--input-text", "go", "--thread", "untraced")
	if len(spans()) != n {
		t.Fatal("spans were exported without an endpoint")
	}
	env["OTEL_EXPORTER_OTLP_ENDPOINT"], env["OTEL_EXPORTER_OTLP_PROTOCOL"] = srv.URL, "http/json"
	if code, _, errOut := cli(t, env, "run", filepath.Join(dir, "a.md"), "--input-text", "go"); code != 2 || !strings.Contains(errOut, "want http/protobuf or grpc") {
		t.Fatalf("http/json: %d %s", code, errOut)
	}
}

// traceCollector is an OTLP/gRPC trace service that keeps span names.
type traceCollector struct {
	coltrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (c *traceCollector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				c.names = append(c.names, sp.Name)
			}
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// With OTEL_EXPORTER_OTLP_PROTOCOL=grpc the spans go to an OTLP/gRPC
// collector.
func TestOTLPGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	col := &traceCollector{}
	coltrace.RegisterTraceServiceServer(srv, col)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "r.yaml"), []byte("replies:\n  - text: done\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.md"), []byte("---\nname: g\nmodel: {provider: scripted, script: r.yaml}\n---\n## Instructions\nx\n"), 0o644)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + lis.Addr().String(), "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "", "CAIRN_STORE": "sqlite:" + filepath.Join(dir, "s.db")}
	mustCLI(t, env, "run", filepath.Join(dir, "a.md"), "--input-text", "go")
	col.mu.Lock()
	defer col.mu.Unlock()
	if !slices.Contains(col.names, "invoke_workflow") || !slices.Contains(col.names, "step") {
		t.Fatalf("spans over gRPC: %v", col.names)
	}
}
