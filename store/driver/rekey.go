package driver

import (
	"context"
)

// BlobRewriter is implemented by backends whose stored blobs store.Engine.Rekey
// can rewrite in place (every built-in backend). Each rewrite is a
// compare-and-swap: it happens only if the stored bytes are still those
// that were read, so a rewrite never undoes a concurrent write.
type BlobRewriter interface {
	// RewriteRow replaces, in one transaction, the Meta, Patch, BaseSize
	// and Sum of the row at old's key — and its snapshot with nw.Snapshot
	// when that is not nil — if the stored row still has old's Sum and
	// Patch (and the stored snapshot old.Snapshot). It reports whether it
	// did.
	RewriteRow(ctx context.Context, old, nw Row) (bool, error)
	// ThreadWrites returns every pending write of a thread.
	ThreadWrites(ctx context.Context, thread string) ([]StoredWrite, error)
	// RewriteWrite replaces a pending write's data with nw if it is still
	// w.Data.
	RewriteWrite(ctx context.Context, w StoredWrite, nw []byte) (bool, error)
	// RewriteRun replaces a run record's data if it is still old.
	RewriteRun(ctx context.Context, id string, old, nw []byte) (bool, error)
	// RewriteEvent replaces the data of event seq of a run's log if it is
	// still old.
	RewriteEvent(ctx context.Context, run string, seq int64, old, nw []byte) (bool, error)
}

// Vacuumer is implemented by backends that can rebuild their storage so
// that bytes they freed are gone from it (SQLite: VACUUM and an emptied
// WAL; PostgreSQL: VACUUM FULL of the store's tables, which locks each
// while it runs). After Rekey encrypts a plaintext store, the plaintext it
// replaced may otherwise stay in freed pages; after Prune, the history it
// deleted.
type Vacuumer interface {
	Vacuum(ctx context.Context) error
}

// StoredWrite is a pending write as a backend stores it.
type StoredWrite struct {
	Thread, Namespace string
	Seq               int64
	Task              string
	Data              []byte
}

// ItemRewriter is implemented by item backends whose values store.Engine.Rekey
// can rewrite (every built-in backend).
type ItemRewriter interface {
	// StoredItems returns up to limit items (expired or not) with keys
	// after after, ordered by tenant, namespace and key; only ItemKey and
	// Value are filled.
	StoredItems(ctx context.Context, after ItemKey, limit int) ([]ItemRow, error)
	// RewriteItem replaces an item's value with nw if it is still old.
	RewriteItem(ctx context.Context, k ItemKey, old, nw []byte) (bool, error)
}
