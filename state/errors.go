package state

import (
	"errors"
	"fmt"
)

// Sentinel errors. Functions wrap them; test with errors.Is.
var (
	// ErrInvalidDoc: the input is not a JSON object state.
	ErrInvalidDoc = errors.New("state: invalid document")
	// ErrInvalidJSON: a value is not valid JSON.
	ErrInvalidJSON = errors.New("state: invalid JSON")
	// ErrInvalidPatch: a patch is malformed (unknown op, missing value, bad pointer).
	ErrInvalidPatch = errors.New("state: invalid patch")
	// ErrPathNotFound: a patch names a location that does not exist.
	ErrPathNotFound = errors.New("state: path not found")
	// ErrTestFailed: a test operation did not match.
	ErrTestFailed = errors.New("state: patch test failed")
	// ErrCorrupt: an encoded document or patch is damaged.
	ErrCorrupt = errors.New("state: corrupt encoding")
	// ErrNoField: the document has no such field.
	ErrNoField = errors.New("state: no such field")
	// ErrUnknownField: an update or a strict decode names a field the schema does not declare.
	ErrUnknownField = errors.New("state: unknown field")
	// ErrUnknownReducer: a schema names a reducer that is not registered.
	ErrUnknownReducer = errors.New("state: unknown reducer")
	// ErrInvalidUpdate: an update value does not fit its field's reducer.
	ErrInvalidUpdate = errors.New("state: invalid update")
	// ErrMessageNotFound: a message removal names an id that is not there.
	ErrMessageNotFound = errors.New("state: message not found")
	// ErrEncode: a value cannot be encoded as JSON.
	ErrEncode = errors.New("state: cannot encode value")
	// ErrDecode: a value cannot be decoded into its Go type.
	ErrDecode = errors.New("state: cannot decode value")
	// ErrUnknownVersion: a state's schema_version is newer than the code knows.
	ErrUnknownVersion = errors.New("state: unknown schema version")
	// ErrMissingMigration: no migration is registered for a version step.
	ErrMissingMigration = errors.New("state: missing migration")
	// ErrInvalidState: a built-in field breaks its rule.
	ErrInvalidState = errors.New("state: invalid state")
	// ErrUnknownStopReason: a stop reason outside the known set.
	ErrUnknownStopReason = errors.New("state: unknown stop reason")
)

// FieldError says which field (as a JSON pointer) a failure is about.
type FieldError struct {
	Path string // JSON pointer, e.g. /messages/3/content
	Err  error
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %s: %v", e.Path, e.Err) }

func (e *FieldError) Unwrap() error { return e.Err }
