package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/server/lgsaver"
	"github.com/cairn-dev/cairn/store"
)

// apiError is an error with its HTTP status; Path says where in the
// request the problem is (422s).
type apiError struct {
	Status int
	Msg    string
	Path   string
}

func (e *apiError) Error() string {
	if e.Path != "" {
		return e.Path + ": " + e.Msg
	}
	return e.Msg
}

func unprocessable(path, format string, args ...any) error {
	return &apiError{Status: http.StatusUnprocessableEntity, Path: path, Msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &apiError{Status: http.StatusNotFound, Msg: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) error {
	return &apiError{Status: http.StatusConflict, Msg: fmt.Sprintf(format, args...)}
}

// statusOf maps an error to its HTTP status by its type, never its text:
// the one place the run service's errors (runs.Error and its kinds) and
// the lower packages' sentinels become statuses.
func statusOf(err error) int {
	if ae, ok := errors.AsType[*apiError](err); ok {
		return ae.Status
	}
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, lgsaver.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, lgsaver.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, lgsaver.ErrInvalidInput):
		return http.StatusUnprocessableEntity
	case errors.Is(err, runs.ErrBusy), errors.Is(err, runs.ErrState), errors.Is(err, runs.ErrExists), errors.Is(err, store.ErrConflict),
		errors.Is(err, agentfile.ErrUnfinished), errors.Is(err, agentfile.ErrOtherFile), errors.Is(err, pipeline.ErrFinished):
		return http.StatusConflict
	case errors.Is(err, runs.ErrInvalidInput), errors.Is(err, store.ErrInvalidArgument), errors.Is(err, store.ErrInvalidID),
		errors.Is(err, flow.ErrInvalidGraph), errors.Is(err, flow.ErrNothingToResume), errors.Is(err, agentfile.ErrInvalidFile),
		errors.Is(err, store.ErrBadBundle):
		return http.StatusUnprocessableEntity
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, runs.ErrClosed), errors.Is(err, store.ErrClosed), errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// writeError answers with the error as {"detail": …}, as LangGraph's
// server does. Internal errors are logged and answered without detail.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	body := map[string]any{"detail": err.Error()}
	if ae, ok := errors.AsType[*apiError](err); ok && ae.Path != "" {
		body["path"] = ae.Path
		body["detail"] = ae.Msg
	} else if re, ok := errors.AsType[*runs.Error](err); ok && re.Path != "" {
		body["path"] = re.Path
		body["detail"] = re.Msg
	} else if se, ok := errors.AsType[*lgsaver.Error](err); ok && se.Path != "" {
		body["path"] = se.Path
		body["detail"] = se.Msg
	}
	if code == http.StatusInternalServerError {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", s.redact.Error(err))
		body["detail"] = "internal error"
	}
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"detail":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
