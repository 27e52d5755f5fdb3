package driver

import (
	"context"
)

// ItemRewriter is implemented by item backends whose values Engine.Rekey
// can rewrite (every built-in backend).
type ItemRewriter interface {
	// StoredItems returns up to limit items (expired or not) with keys
	// after after, ordered by tenant, namespace and key; only ItemKey and
	// Value are filled.
	StoredItems(ctx context.Context, after ItemKey, limit int) ([]ItemRow, error)
	// RewriteItem replaces an item's value with nw if it is still old.
	RewriteItem(ctx context.Context, k ItemKey, old, nw []byte) (bool, error)
}
