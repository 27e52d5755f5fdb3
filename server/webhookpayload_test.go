package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/crashtest"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// outcomeGraph ends as its input says: {"end": "error"} fails its node,
// {"end": "pause"} interrupts it, anything else succeeds.
func outcomeGraph(t *testing.T) *runs.Graph {
	t.Helper()
	c, err := flow.NewGraph(state.MustSchema(state.WithField("end", state.ReducerReplace), state.WithField("done", state.ReducerReplace))).
		AddNode("work", func(ctx context.Context, s state.Doc) (state.Update, error) {
			var end string
			_ = s.Get("end", &end)
			switch end {
			case "error":
				return nil, errors.New("the printer is on fire")
			case "pause":
				if err := flow.Interrupt(ctx, "go on?", nil); err != nil {
					return nil, err
				}
			}
			return state.Update{"done": true}, nil
		}).
		Chain("work").Compile()
	if err != nil {
		t.Fatal(err)
	}
	return &runs.Graph{ID: "outcome", Graph: c}
}

// TestWebhookPayload: a run's webhook body is LangGraph's — the run's
// fields, run_started_at, run_ended_at, webhook_sent_at, values, and for
// a run that failed error (its message) — so a receiver tells success,
// error and interrupted apart; payload_fields keeps only what it names.
func TestWebhookPayload(t *testing.T) {
	var mu sync.Mutex
	got := map[string]map[string]any{} // thread → body
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		got[r.URL.Query().Get("t")] = m
		mu.Unlock()
	}))
	defer recv.Close()
	runFields := []string{"run_id", "thread_id", "assistant_id", "created_at", "updated_at", "status", "metadata", "multitask_strategy", "kwargs", "cancel_reason", "run_started_at", "run_ended_at", "webhook_sent_at", "values"}
	for _, tc := range []struct {
		name, end, status string
		keep              []string // payload_fields
		fields            []string // the body's fields
		values            func(map[string]any) bool
	}{
		{name: "success", end: "ok", status: "success", fields: runFields, values: func(v map[string]any) bool { return v["done"] == true }},
		{name: "error", end: "error", status: "error", fields: append(slices.Clone(runFields), "error"), values: func(v map[string]any) bool { return v["end"] == "error" && v["__error__"] == nil }},
		{name: "interrupted", end: "pause", status: "interrupted", fields: runFields, values: func(v map[string]any) bool { return v["__interrupt__"] != nil }},
		{name: "payload_fields", end: "error", status: "error", keep: []string{"run_id", "status", "error"}, fields: []string{"error", "run_id", "status"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := runs.WebhookPolicy{PayloadFields: tc.keep}
			srv, err := server.New(server.Config{Store: inmem.Open(store.Options{}), Assistants: []runs.Assistant{outcomeGraph(t)}, WebhookPrivate: true, WebhookPolicy: policy})
			if err != nil {
				t.Fatal(err)
			}
			ts := &testServer{t: t, srv: srv, url: newHTTP(t, srv)}
			ts.json("POST", "/threads", map[string]any{"thread_id": "h"}, 200)
			ts.do("POST", "/threads/h/runs/wait", map[string]any{"assistant_id": "outcome", "input": map[string]any{"end": tc.end}, "webhook": recv.URL + "/hook?t=" + tc.name})
			var hook map[string]any
			crashtest.WaitFor(t, 10*time.Second, "the webhook", func() bool {
				mu.Lock()
				defer mu.Unlock()
				hook = got[tc.name]
				return hook != nil
			})
			if keys := slices.Sorted(maps.Keys(hook)); !slices.Equal(keys, slices.Sorted(slices.Values(tc.fields))) {
				t.Fatalf("fields %v, want %v", keys, tc.fields)
			}
			if hook["status"] != tc.status {
				t.Fatalf("status %v, want %s", hook["status"], tc.status)
			}
			if msg, ok := hook["error"].(string); tc.status == "error" && (!ok || msg == "") {
				t.Fatalf("error %v: want the run's message", hook["error"])
			}
			if tc.keep != nil {
				return
			}
			for _, at := range []string{"run_started_at", "run_ended_at", "webhook_sent_at"} {
				if s, _ := hook[at].(string); s == "" {
					t.Fatalf("%s %v", at, hook[at])
				}
			}
			if v, _ := hook["values"].(map[string]any); !tc.values(v) {
				t.Fatalf("values %v", hook["values"])
			}
		})
	}
}
