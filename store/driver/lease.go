package driver

import (
	"errors"
	"fmt"
)

var (
	// ErrFenced: an append or a renewal carried a fencing token whose
	// lease another owner has taken over; nothing was written. Errors that
	// wrap it wrap ErrConflict too.
	ErrFenced = errors.New("store: the lease was taken over (fenced)")
	// ErrLeaseHeld: another owner holds a live lease on the thread. Errors
	// that wrap it wrap ErrConflict too.
	ErrLeaseHeld = errors.New("store: the thread's lease is held by another owner")
)

// FencedError builds the error of a fenced write.
func FencedError(thread string, token, current int64) error {
	return fmt.Errorf("%w: %w: thread %q: token %d, the lease now has %d", ErrConflict, ErrFenced, thread, token, current)
}
