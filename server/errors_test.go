package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

// TestStatusOf: errors map to statuses by their type.
func TestStatusOf(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{fmt.Errorf("x: %w", store.ErrNotFound), 404},
		{fmt.Errorf("x: %w", store.ErrConflict), 409},
		{fmt.Errorf("x: %w", store.ErrInvalidArgument), 422},
		{fmt.Errorf("x: %w", store.ErrUnavailable), 503},
		{store.ErrClosed, 503},
		{context.DeadlineExceeded, 504},
		{errors.New("anything else"), 500},
	}
	for _, tc := range tests {
		if got := statusOf(tc.err); got != tc.want {
			t.Errorf("statusOf(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
