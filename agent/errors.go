package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/internal/backoff"
	"github.com/cairn-dev/cairn/state"
)

// Sentinel errors of model calls; test with errors.Is.
var (
	ErrAuth          = errors.New("agent: authentication failed")
	ErrModelNotFound = errors.New("agent: model not found")
	ErrRateLimited   = errors.New("agent: rate limited")
	ErrServer        = errors.New("agent: provider server error")
	ErrTimeout       = errors.New("agent: request timed out")
	ErrMalformed     = errors.New("agent: malformed provider response")
	ErrBadRequest    = errors.New("agent: request rejected")
	// ErrContextOverflow: the prompt does not fit the model's context
	// window. Providers map their context-length errors to it; a loop
	// agent stops with stop reason context_overflow.
	ErrContextOverflow = errors.New("agent: context window exceeded")
	ErrScriptDone      = errors.New("agent: scripted model has no reply left")
	// Structured output.
	// Quick Agent's messages, word for word.
	//lint:ignore ST1005 Quick Agent's exact message
	ErrNoJSON = errors.New("No JSON object found in model output.")
	//lint:ignore ST1005 Quick Agent's exact message
	ErrUnbalancedJSON = errors.New("Unbalanced JSON object in model output.")
	ErrSchema         = errors.New("agent: output does not match the schema")
	ErrInvalidSchema  = errors.New("agent: invalid JSON Schema")
	// Tools.
	ErrUnknownTool = errors.New("agent: unknown tool")
	ErrToolArgs    = errors.New("agent: invalid tool arguments")
	ErrToolLimit   = errors.New("agent: tool loop limit reached")
)

// ProviderError is a failed model call.
type ProviderError struct {
	Provider   string
	Status     int           // HTTP status, 0 when none
	RetryAfter time.Duration // from Retry-After, when given
	Message    string        // what the provider said (never the API key)
	Err        error         // one of the sentinels
}

func (e *ProviderError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %v", e.Provider, e.Err)
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	return b.String()
}

func (e *ProviderError) Unwrap() error { return e.Err }

// StopReason is why a run stops when a step fails with e: context_overflow
// for ErrContextOverflow, none ("") otherwise (see flow.StopReasoner).
func (e *ProviderError) StopReason() state.StopReason {
	if errors.Is(e.Err, ErrContextOverflow) {
		return state.StopContextOverflow
	}
	return ""
}

// Retryable reports whether trying again may succeed: rate limits, server
// errors and timeouts.
func Retryable(err error) bool {
	return errors.Is(err, ErrRateLimited) || errors.Is(err, ErrServer) || errors.Is(err, ErrTimeout)
}

// RetryPolicy retries retryable model errors with exponential backoff and
// full jitter, waiting at least a provider's Retry-After.
type RetryPolicy struct {
	Attempts int           // total attempts (default 3)
	Initial  time.Duration // first backoff (default 500ms)
	Max      time.Duration // cap (default 30s)
	// Logger receives each retry at debug level (attempt, wait, error).
	// Nil: no logging.
	Logger *slog.Logger
}

// WithRetry wraps a model with a retry policy.
func WithRetry(m Model, p RetryPolicy) Model {
	if p.Attempts <= 0 {
		p.Attempts = 3
	}
	if p.Initial <= 0 {
		p.Initial = 500 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 30 * time.Second
	}
	return &retrying{m: m, p: p}
}

type retrying struct {
	m Model
	p RetryPolicy
}

func (r *retrying) Generate(ctx context.Context, req Request) (Response, error) {
	return r.retry(ctx, func() (Response, bool, error) {
		resp, err := r.m.Generate(ctx, req)
		return resp, false, err
	})
}

// GenerateStream streams through the wrapped model when it streams (else
// its whole reply is one chunk). A failed attempt is tried again only when
// it sent no chunk, so a stream never repeats a piece.
func (r *retrying) GenerateStream(ctx context.Context, req Request, onChunk func(Chunk)) (Response, error) {
	sm, ok := r.m.(StreamingModel)
	return r.retry(ctx, func() (Response, bool, error) {
		if !ok {
			resp, err := r.m.Generate(ctx, req)
			if err == nil {
				sendWhole(resp.Message, onChunk)
			}
			return resp, false, err
		}
		sent := false
		resp, err := sm.GenerateStream(ctx, req, func(c Chunk) { sent = true; onChunk(c) })
		return resp, sent, err
	})
}

// retry calls attempt until it succeeds, fails for good (not retryable,
// out of attempts, or after sending part of a stream) or ctx ends. Every
// attempt's usage is counted.
func (r *retrying) retry(ctx context.Context, attempt func() (resp Response, streamed bool, err error)) (Response, error) {
	wait := backoff.Policy{Initial: r.p.Initial, Max: r.p.Max}
	var usage Usage
	for a := 1; ; a++ {
		resp, streamed, err := attempt()
		usage = usage.Add(resp.Usage)
		if err == nil {
			resp.Usage = usage
			return resp, nil
		}
		if a >= r.p.Attempts || !Retryable(err) || streamed {
			return Response{Usage: usage}, err
		}
		var floor time.Duration
		var pe *ProviderError
		if errors.As(err, &pe) {
			floor = pe.RetryAfter
		}
		d := wait.Delay(a, floor)
		if r.p.Logger != nil {
			r.p.Logger.Debug("model retry", "attempt", a, "wait", d, "error", err.Error())
		}
		if err := backoff.Sleep(ctx, d); err != nil {
			return Response{Usage: usage}, err
		}
	}
}

// Redact removes secret (an API key) from the error's message.
func (e *ProviderError) Redact(secret string) *ProviderError {
	if len(secret) >= 6 {
		e.Message = strings.ReplaceAll(e.Message, secret, "[redacted]")
	}
	return e
}

// Provider is the wrapped model's provider name, when it has one.
func (r *retrying) Provider() string {
	if p, ok := r.m.(interface{ Provider() string }); ok {
		return p.Provider()
	}
	return ""
}

// ModelName is the wrapped model's requested model, when it has one.
func (r *retrying) ModelName() string {
	if n, ok := r.m.(interface{ ModelName() string }); ok {
		return n.ModelName()
	}
	return ""
}
