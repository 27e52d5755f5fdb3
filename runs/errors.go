package runs

import (
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/store"
)

// The kinds of the service's errors. A front end tells them apart with
// errors.Is (the HTTP server maps each to a status in one place); an
// *Error carries the kind, the message, and for invalid input the place.
var (
	// ErrInvalidInput: the request is not valid; Error.Path says where
	// ("$.input", "$.command.resume", "Last-Event-ID"). Nothing is stored.
	ErrInvalidInput = errors.New("runs: invalid input")
	// ErrNotFound: no such thread, run or assistant for the caller's
	// tenant. It wraps store.ErrNotFound.
	ErrNotFound = fmt.Errorf("runs: %w", store.ErrNotFound)
	// ErrBusy: the thread has a run and the request asked for no other
	// to wait or replace it (multitask strategy reject).
	ErrBusy = errors.New("runs: the thread is busy")
	// ErrUnfinished: a new run was asked for on a thread whose last run
	// has not finished (agentfile.CheckStart); it wraps
	// agentfile.ErrUnfinished. ErrOtherFile, which the thread's file
	// decides too, is agentfile's own.
	ErrUnfinished = fmt.Errorf("runs: %w", agentfile.ErrUnfinished)
	// ErrState: the run, thread or pause is not in a state that allows
	// what was asked (a run that has ended, a pause answered already, a
	// retry of a run that succeeded).
	ErrState = errors.New("runs: not in a state that allows it")
	// ErrClosed: the service is shutting down.
	ErrClosed = errors.New("runs: the service is shutting down")
)

// Error is an error of the service: its kind (one of the Err values
// above), what went wrong, and, for invalid input, where.
type Error struct {
	Kind error
	Path string
	Msg  string
}

func (e *Error) Error() string {
	if e.Path != "" {
		return e.Path + ": " + e.Msg
	}
	return e.Msg
}

// Unwrap returns the kind.
func (e *Error) Unwrap() error { return e.Kind }

// newError makes an *Error of kind.
func newError(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// invalid is an ErrInvalidInput at path.
func invalid(path, format string, args ...any) error {
	return &Error{Kind: ErrInvalidInput, Path: path, Msg: fmt.Sprintf(format, args...)}
}

// InvalidInput is an ErrInvalidInput at path, for a front end that checks
// a request's parts of its own (its query, its headers) as the service
// checks the rest.
func InvalidInput(path, format string, args ...any) error {
	return invalid(path, format, args...)
}

// refused reports an error that refuses a request for the state things
// are in (a busy or unfinished thread, an ended run, a lost race).
func refused(err error) bool {
	for _, kind := range []error{ErrBusy, ErrState, agentfile.ErrUnfinished, agentfile.ErrOtherFile, store.ErrConflict, pipeline.ErrFinished} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

// invalidKind reports an error of bad input, the service's or a lower
// package's.
func invalidKind(err error) bool {
	for _, kind := range []error{ErrInvalidInput, store.ErrInvalidArgument, store.ErrInvalidID, flow.ErrInvalidGraph, flow.ErrNothingToResume, agentfile.ErrInvalidFile} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}
