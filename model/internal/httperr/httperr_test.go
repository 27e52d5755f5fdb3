package httperr

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent"
)

func TestForStatus(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   error
	}{
		{401, agent.ErrAuth}, {403, agent.ErrAuth}, {404, agent.ErrModelNotFound}, {408, agent.ErrTimeout},
		{429, agent.ErrRateLimited}, {500, agent.ErrServer}, {503, agent.ErrServer}, {400, agent.ErrBadRequest}, {422, agent.ErrBadRequest},
	} {
		if got := ForStatus(tc.status); got != tc.want {
			t.Errorf("ForStatus(%d) = %v, want %v", tc.status, got, tc.want)
		}
	}
}

func TestStatus(t *testing.T) {
	pe := Status("anthropic", 529, "", "2")
	if !errors.Is(pe, agent.ErrServer) || pe.RetryAfter != 2*time.Second || pe.Message != "" && pe.Message != http.StatusText(529) {
		t.Fatalf("Status(529) = %+v", pe)
	}
	if pe := Status("openai", 429, "slow down", ""); !errors.Is(pe, agent.ErrRateLimited) || pe.Message != "slow down" || !agent.Retryable(pe) {
		t.Fatalf("Status(429) = %+v", pe)
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"3", 3 * time.Second}, {"0.5", 500 * time.Millisecond}, {"-1", 0}, {"soon", 0},
		{time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), 0},
	} {
		if got := RetryAfter(tc.in); got != tc.want {
			t.Errorf("RetryAfter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if got := RetryAfter(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)); got < 59*time.Minute {
		t.Errorf("RetryAfter(an hour from now) = %v", got)
	}
}

func TestCall(t *testing.T) {
	var syntax error = &json.SyntaxError{}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"deadline", context.DeadlineExceeded, agent.ErrTimeout},
		{"bad body", syntax, agent.ErrMalformed},
		{"transport", errors.New("connection refused"), agent.ErrServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Call(context.Background(), "p", tc.err, time.Second); !errors.Is(err, tc.want) {
				t.Fatalf("Call = %v, want %v", err, tc.want)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Call(ctx, "p", errors.New("x"), time.Second); err != context.Canceled {
		t.Fatalf("Call on a cancelled context = %v", err)
	}
}
