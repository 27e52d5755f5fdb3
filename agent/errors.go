package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

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

// ErrorForStatus maps an HTTP status to a sentinel.
func ErrorForStatus(status int) error {
	switch {
	case status == 401 || status == 403:
		return ErrAuth
	case status == 404:
		return ErrModelNotFound
	case status == 408:
		return ErrTimeout
	case status == 429:
		return ErrRateLimited
	case status >= 500:
		return ErrServer
	default:
		return ErrBadRequest
	}
}

// RetryPolicy retries retryable model errors with exponential backoff and
// full jitter, waiting at least a provider's Retry-After.
type RetryPolicy struct {
	Attempts int           // total attempts (default 3)
	Initial  time.Duration // first backoff (default 500ms)
	Max      time.Duration // cap (default 30s)
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
	backoff := r.p.Initial
	var usage Usage
	for a := 1; ; a++ {
		resp, err := r.m.Generate(ctx, req)
		usage = usage.Add(resp.Usage)
		if err == nil {
			resp.Usage = usage
			return resp, nil
		}
		if a >= r.p.Attempts || !Retryable(err) {
			return Response{Usage: usage}, err
		}
		wait := time.Duration(rand.Int64N(int64(backoff)) + 1)
		var pe *ProviderError
		if errors.As(err, &pe) && pe.RetryAfter > wait {
			wait = pe.RetryAfter
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return Response{Usage: usage}, ctx.Err()
		}
		backoff = min(backoff*2, r.p.Max)
	}
}

// RetryAfter reads an HTTP Retry-After header: seconds, or an HTTP date.
func RetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// StatusError is the typed error of an HTTP answer with a failing status:
// the message is the provider's, retryAfter the Retry-After header.
func StatusError(provider string, status int, message, retryAfter string) *ProviderError {
	err := ErrorForStatus(status)
	if status == 529 { // Anthropic's "overloaded"
		err = ErrServer
	}
	if message == "" {
		message = http.StatusText(status)
	}
	return &ProviderError{Provider: provider, Status: status, Message: message, RetryAfter: RetryAfter(retryAfter), Err: err}
}

// CallError is the typed error of a call that got no HTTP answer: a
// timeout of the call itself (ErrTimeout), a body that does not decode
// (ErrMalformed), or a transport failure (ErrServer). When ctx itself ended,
// its error is returned as it is.
func CallError(ctx context.Context, provider string, err error, timeout time.Duration) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	pe := &ProviderError{Provider: provider, Err: ErrServer, Message: err.Error()}
	var se *json.SyntaxError
	var ue *json.UnmarshalTypeError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		pe.Err, pe.Message = ErrTimeout, fmt.Sprintf("no answer within %s", timeout)
	case errors.As(err, &se), errors.As(err, &ue):
		pe.Err = ErrMalformed
	}
	return pe
}

// Redact removes secret (an API key) from the error's message.
func (e *ProviderError) Redact(secret string) *ProviderError {
	if len(secret) >= 6 {
		e.Message = strings.ReplaceAll(e.Message, secret, "[redacted]")
	}
	return e
}
