package driver

import "context"

// ExternalIDIndex is a Backend that keeps Row.ExternalID (store format 8;
// store.ExternalIDs reads it): Insert stores
// it with the row (a copied row keeps it), Rows returns it, and the rows
// deleted take their ids with them.
type ExternalIDIndex interface {
	// ExternalSeq returns the newest seq of a thread namespace's rows
	// whose ExternalID is id; ErrNotFound when none is stored.
	ExternalSeq(ctx context.Context, thread, ns, id string) (int64, error)
}
