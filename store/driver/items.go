package driver

import (
	"context"
	"iter"
)

// ItemKey names an item as a backend stores it: its namespace's labels
// joined by ".".
type ItemKey struct {
	Tenant, Namespace, Key string
}

// ItemRow is an item as a backend stores it.
type ItemRow struct {
	ItemKey
	// Value is the item's JSON object.
	Value     []byte
	CreatedAt int64 // Unix nanoseconds
	UpdatedAt int64 // Unix nanoseconds
	// TTL is the item's time to live in nanoseconds (0: none); ExpiresAt
	// when it expires (Unix nanoseconds; 0: never).
	TTL, ExpiresAt int64
	// Text holds the words full-text search matches (lower case, separated
	// by spaces; Terms); "" keeps the item out of text search. Written,
	// never read back.
	Text string
	// Vectors are the embeddings of the item's indexed texts (nil: none).
	Vectors [][]float32
	// Score is the full-text rank of a row a text scan returned.
	Score float64
	// IfAbsent makes the write fail with ErrConflict, and the whole
	// transaction write nothing, when a row of its key exists (expired
	// or not). Written, never read back.
	IfAbsent bool
}

// ItemScan selects the rows of one tenant under a namespace prefix,
// skipping expired ones.
type ItemScan struct {
	Tenant string
	// Prefix is a joined namespace: rows in it or below it ("" all).
	Prefix string
	// Now is the time expiry is judged at (Unix nanoseconds).
	Now int64
	// Terms, when set, keeps the rows whose Text holds every one of
	// these words, best ranked first with their Score; otherwise rows
	// come newest updated first. Ties go by namespace, then key.
	Terms []string
	// Vectors asks for each row's Vectors, and keeps only rows that have
	// some.
	Vectors bool
}

// ItemBackend is what a backend implements to keep items; ItemsOf puts
// the checks, the clock, the text index and the embeddings on top.
type ItemBackend interface {
	// WriteItems writes and deletes items in one transaction. A put
	// replaces the row of its key, keeping its CreatedAt unless that row
	// had expired at the put's UpdatedAt; a put IfAbsent fails with
	// ErrConflict instead, and nothing is written.
	WriteItems(ctx context.Context, puts []ItemRow, deletes []ItemKey) error
	// GetItems returns the unexpired rows among keys (in any order).
	GetItems(ctx context.Context, keys []ItemKey, now int64) ([]ItemRow, error)
	// ScanItems yields rows in the order ItemScan says.
	ScanItems(ctx context.Context, q ItemScan) iter.Seq2[ItemRow, error]
	// ItemNamespaces lists the distinct joined namespaces of a tenant's
	// unexpired rows at or below prefix ("" all).
	ItemNamespaces(ctx context.Context, tenant, prefix string, now int64) ([]string, error)
	// TouchItems sets ExpiresAt to now + TTL on the unexpired rows among
	// keys that have a TTL.
	TouchItems(ctx context.Context, keys []ItemKey, now int64) error
	// SweepItems deletes the rows expired at now and counts them.
	SweepItems(ctx context.Context, now int64) (int64, error)
}
