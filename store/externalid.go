package store

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/store/driver"
)

// MaxExternalID is the longest Checkpoint.ExternalID, in bytes.
const MaxExternalID = 256

// ExternalIDs finds checkpoints by the id their writer gave them
// (Checkpoint.ExternalID) through an index the store keeps beside the
// rows (format 8): a lookup reads the index and one row, however long
// the namespace's history.
type ExternalIDs interface {
	// ByExternalID returns, without its state, the newest checkpoint of
	// a thread namespace whose ExternalID is id; ErrNotFound when none is
	// stored.
	ByExternalID(ctx context.Context, thread, ns, id string) (Checkpoint, error)
}

// ExternalIDsOf returns the ExternalIDs of a store whose backend keeps
// the index, or an error wrapping ErrInvalidArgument.
func ExternalIDsOf(s Store) (ExternalIDs, error) {
	if e, ok := s.(*Engine); ok {
		if _, ok := e.b.(driver.ExternalIDIndex); ok {
			return e, nil
		}
		return nil, fmt.Errorf("%w: this store keeps no index of external ids", ErrInvalidArgument)
	}
	if x, ok := s.(ExternalIDs); ok {
		return x, nil
	}
	return nil, fmt.Errorf("%w: this store keeps no index of external ids", ErrInvalidArgument)
}

// ByExternalID implements ExternalIDs.
func (e *Engine) ByExternalID(ctx context.Context, thread, ns, id string) (Checkpoint, error) {
	if err := e.check(thread, ns); err != nil {
		return Checkpoint{}, err
	}
	x, ok := e.b.(driver.ExternalIDIndex)
	if !ok {
		return Checkpoint{}, fmt.Errorf("%w: this store keeps no index of external ids", ErrInvalidArgument)
	}
	missing := fmt.Errorf("%w: thread %q namespace %q has no checkpoint of external id %q", ErrNotFound, thread, ns, id)
	if id == "" || len(id) > MaxExternalID {
		return Checkpoint{}, missing
	}
	seq, err := x.ExternalSeq(ctx, thread, ns, id)
	if err != nil {
		return Checkpoint{}, err
	}
	rows, err := e.rows(ctx, driver.RowQuery{Thread: thread, Namespace: ns, From: seq, To: seq})
	if err != nil {
		return Checkpoint{}, err
	}
	if len(rows) == 0 || rows[0].ExternalID != id { // deleted since
		return Checkpoint{}, missing
	}
	return checkpoint(&rows[0])
}
