package flow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// The runner logs what it does — runs, steps, retries, redactions — at
// their levels, and never a state value or a secret.
func TestLogging(t *testing.T) {
	const secret = "sk-live-abcdefghijklmnopqrstuvwxyz123456"
	tries := 0
	g := flow.NewGraph(schema).
		AddNode("flaky", func(ctx context.Context, d state.Doc) (state.Update, error) {
			if tries++; tries == 1 {
				return nil, errors.New("transient failure, key " + secret)
			}
			return state.Update{"log": "the value " + secret}, nil
		}, flow.WithRetry(flow.RetryPolicy{Attempts: 2, Initial: time.Millisecond})).
		Chain("flaky")
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := newRunner(t, g, inmem.Open(store.Options{}), flow.Options{Logger: logger, Redact: redact.Default()})
	if _, err := r.Invoke(context.Background(), "t", state.Update{"log": "private input"}); err != nil {
		t.Fatal(err)
	}
	levels := map[string]string{}
	redacted := -1
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec struct {
			Level, Msg, Thread string
			Redacted           *int `json:"redacted_updates"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Thread != "t" {
			t.Fatalf("record %s: %v", line, err)
		}
		levels[rec.Msg] = rec.Level
		if rec.Msg == "run end" && rec.Redacted != nil {
			redacted = *rec.Redacted
		}
	}
	// A redaction is told at info level (which node), and counted at the
	// run's end.
	if redacted != 1 {
		t.Errorf("run end counts %d redacted updates, want 1", redacted)
	}
	for msg, level := range map[string]string{"run start": "INFO", "node retry": "DEBUG", "step committed": "DEBUG", "secret redacted from a node's update": "INFO", "run end": "INFO"} {
		if levels[msg] != level {
			t.Errorf("record %q at %q, want %q (records: %v)", msg, levels[msg], level, levels)
		}
	}
	for _, leak := range []string{secret, "private input", "the value"} {
		if strings.Contains(buf.String(), leak) {
			t.Fatalf("the log holds %q:\n%s", leak, buf.String())
		}
	}
}
