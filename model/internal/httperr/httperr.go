package httperr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/cairn-dev/cairn/agent"
)

// ForStatus maps an HTTP status to a sentinel.
func ForStatus(status int) error {
	switch {
	case status == 401 || status == 403:
		return agent.ErrAuth
	case status == 404:
		return agent.ErrModelNotFound
	case status == 408:
		return agent.ErrTimeout
	case status == 429:
		return agent.ErrRateLimited
	case status >= 500:
		return agent.ErrServer
	default:
		return agent.ErrBadRequest
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

// Status is the typed error of an HTTP answer with a failing status:
// the message is the provider's, retryAfter the Retry-After header.
func Status(provider string, status int, message, retryAfter string) *agent.ProviderError {
	err := ForStatus(status)
	if status == 529 { // Anthropic's "overloaded"
		err = agent.ErrServer
	}
	if message == "" {
		message = http.StatusText(status)
	}
	return &agent.ProviderError{Provider: provider, Status: status, Message: message, RetryAfter: RetryAfter(retryAfter), Err: err}
}

// Call is the typed error of a call that got no HTTP answer: a
// timeout of the call itself (agent.ErrTimeout), a body that does not decode
// (agent.ErrMalformed), or a transport failure (agent.ErrServer). When ctx itself ended,
// its error is returned as it is.
func Call(ctx context.Context, provider string, err error, timeout time.Duration) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	pe := &agent.ProviderError{Provider: provider, Err: agent.ErrServer, Message: err.Error()}
	var se *json.SyntaxError
	var ue *json.UnmarshalTypeError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		pe.Err, pe.Message = agent.ErrTimeout, fmt.Sprintf("no answer within %s", timeout)
	case errors.As(err, &se), errors.As(err, &ue):
		pe.Err = agent.ErrMalformed
	}
	return pe
}
