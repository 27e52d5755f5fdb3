package lgsaver

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Error is a request the saver refuses. Kind is ErrInvalidInput,
// ErrNotFound or ErrConflict (errors.Is finds it); Path, for invalid
// input, says where in the request ($.checkpoint.id); Msg is the reason
// for the client, without Path. The mounting server answers it with the
// status of its kind (422, 404, 409) and its own error body. Errors of
// the store (store.ErrNotFound, …) and of Config.Decode are returned as
// they are.
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

func (e *Error) Unwrap() error { return e.Kind }

// The kinds of Error.
var (
	// ErrInvalidInput: a request the saver cannot take (HTTP 422).
	ErrInvalidInput = kind("lgsaver: invalid input")
	// ErrNotFound: a thread, namespace or checkpoint the request names
	// is not stored, or is another tenant's (HTTP 404).
	ErrNotFound = kind("lgsaver: not found")
	// ErrConflict: the thread moved on (another writer put a checkpoint
	// after the parent), or a checkpoint or thread exists (HTTP 409).
	ErrConflict = kind("lgsaver: conflict")
)

type kindError string

func (k kindError) Error() string { return string(k) }

func kind(s string) error { return kindError(s) }

// StatusOf is the HTTP status of an Error's kind, or 0 for an error
// that is not one.
func StatusOf(err error) int {
	e, ok := errors.AsType[*Error](err)
	if !ok {
		return 0
	}
	switch e.Kind {
	case ErrInvalidInput:
		return http.StatusUnprocessableEntity
	case ErrNotFound:
		return http.StatusNotFound
	case ErrConflict:
		return http.StatusConflict
	}
	return 0
}

func unprocessable(path, format string, args ...any) error {
	return &Error{Kind: ErrInvalidInput, Path: path, Msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &Error{Kind: ErrNotFound, Msg: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) error {
	return &Error{Kind: ErrConflict, Msg: fmt.Sprintf(format, args...)}
}

// oneOf checks an enumerated field.
func oneOf(path, v string, allowed ...string) error {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	return unprocessable(path, "%q: want %s", v, strings.Join(allowed, ", "))
}

// cmpErr is err when not nil, else fallback.
func cmpErr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}
