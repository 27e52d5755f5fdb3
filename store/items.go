package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/store/driver"
)

// Item is one entry of the long-term memory store: a JSON object kept
// under a key in a hierarchical namespace (["users", "u1", "prefs"]),
// across threads. Numbers in Value are json.Number, so they keep every
// digit they were given.
type Item struct {
	Namespace []string       `json:"namespace"`
	Key       string         `json:"key"`
	Value     map[string]any `json:"value"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
	// Score is a search hit's relevance, larger is better: the cosine
	// similarity to the query for a semantic search, the full-text rank
	// for a text search (comparable within one result only); nil for a
	// search without a query and for Get.
	Score *float64 `json:"score,omitempty"`
}

// ItemOp is one operation of ItemStore.Batch: GetOp, PutOp, DeleteOp,
// SearchOp or ListNamespacesOp.
type ItemOp interface{ itemOp() }

// GetOp reads one item.
type GetOp struct {
	// Tenant scopes every operation: a tenant's items are invisible to
	// another ("" is the tenant of a server without API keys).
	Tenant    string
	Namespace []string
	Key       string
	// NoRefresh leaves the item's time to live as it is; by default a
	// read starts it again (LangGraph's refresh_ttl).
	NoRefresh bool
}

// PutOp writes an item, replacing the one under its key (whose CreatedAt
// it keeps).
type PutOp struct {
	Tenant    string
	Namespace []string
	Key       string
	// Value must not be nil (DeleteOp deletes).
	Value map[string]any
	// Index names the fields whose text search finds the item (paths such
	// as "text", "meta.title", "tags[*]", "$" for the whole value); nil:
	// the store's (IndexConfig.Fields, default the whole value).
	Index []string
	// NoIndex keeps the item out of text and semantic search; Get,
	// filters and listings still find it.
	NoIndex bool
	// TTL, when positive, makes the item expire that long after it was
	// last written or read (reads refresh it unless they say NoRefresh).
	// An expired item is never returned, and a sweep deletes it.
	TTL time.Duration
	// IfAbsent makes the batch fail with ErrConflict, writing nothing,
	// when an item is stored under the key already (a writer claims a
	// key that racing writers may claim too).
	IfAbsent bool
}

// DeleteOp deletes an item; deleting one that does not exist is not an
// error.
type DeleteOp struct {
	Tenant    string
	Namespace []string
	Key       string
}

// SearchOp lists the items under a namespace prefix that match a filter
// and a query.
type SearchOp struct {
	Tenant string
	// Prefix is the namespace prefix searched ([] or nil: every item).
	Prefix []string
	// Filter keeps the items whose value matches it: top-level field →
	// a value it must equal (objects match the fields they name, arrays
	// element by element), or an object of comparisons ($eq, $ne, $gt,
	// $gte, $lt, $lte); see CompileFilter.
	Filter map[string]any
	// Query ranks the items by relevance: with an embedder
	// (IndexConfig.Embed) by the cosine similarity of the query's vector
	// to the item's, else by full-text search, which keeps the items
	// holding every word of the query. Empty: newest updated first.
	Query string
	// Limit is the most items returned (0: 10); Offset the matching
	// items skipped first.
	Limit, Offset int
	// NoRefresh leaves the time to live of the items returned as it is.
	NoRefresh bool
}

// ListNamespacesOp lists the namespaces that hold items, sorted.
type ListNamespacesOp struct {
	Tenant string
	// Prefix and Suffix keep the namespaces that start (end) with these
	// labels; a "*" label matches any one label.
	Prefix, Suffix []string
	// MaxDepth, when positive, cuts the namespaces to that many labels
	// (deduplicated).
	MaxDepth int
	// Limit is the most namespaces returned (0: 100); Offset the ones
	// skipped first.
	Limit, Offset int
}

func (GetOp) itemOp()            {}
func (PutOp) itemOp()            {}
func (DeleteOp) itemOp()         {}
func (SearchOp) itemOp()         {}
func (ListNamespacesOp) itemOp() {}

// ItemResult is the result of one operation of a batch: Item for a GetOp
// (nil when there is none), Items for a SearchOp, Namespaces for a
// ListNamespacesOp; nothing for writes.
type ItemResult struct {
	Item       *Item
	Items      []Item
	Namespaces [][]string
}

// ItemStore is the long-term memory store: items kept across threads,
// scoped by tenant, in hierarchical namespaces, with filters, full-text
// and semantic search and times to live, as LangGraph's BaseStore. Every
// built-in backend keeps one (ItemsOf).
type ItemStore interface {
	// Batch runs operations together. Every operation is checked before
	// anything runs; the reads (gets, searches, listings) see the store as
	// it was before the batch, then its writes (the last one of a key wins)
	// commit in one transaction.
	Batch(ctx context.Context, ops []ItemOp) ([]ItemResult, error)
	// Get returns an item; ErrNotFound when there is none (or it expired).
	Get(ctx context.Context, op GetOp) (Item, error)
	// Put writes an item.
	Put(ctx context.Context, op PutOp) error
	// Delete deletes an item.
	Delete(ctx context.Context, op DeleteOp) error
	// Search lists items; see SearchOp.
	Search(ctx context.Context, op SearchOp) ([]Item, error)
	// ListNamespaces lists namespaces; see ListNamespacesOp.
	ListNamespaces(ctx context.Context, op ListNamespacesOp) ([][]string, error)
	// Sweep deletes the expired items of every tenant and says how many.
	Sweep(ctx context.Context) (int64, error)
}

// Embedder turns texts into vectors (an OpenAI-compatible embeddings
// endpoint: model/openai.Embedder).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// IndexConfig says what search indexes, as LangGraph's index config.
type IndexConfig struct {
	// Embed, when set, makes searches with a query semantic: each
	// indexed text of an item gets a vector, and items rank by the best
	// cosine similarity of theirs to the query's. Nil: queries are
	// full-text searches.
	Embed Embedder
	// Dims is the length of Embed's vectors (required with Embed).
	Dims int
	// Fields are the paths of the values indexed (default ["$"], the
	// whole value); PutOp.Index overrides them for one item.
	Fields []string
}

// ErrEmbedding: the embedder failed or answered vectors of the wrong
// size; nothing was written.
var ErrEmbedding = errors.New("store: embedding failed")

// ItemOption configures the item store ItemsOf returns.
type ItemOption func(*itemConfig) error

type itemConfig struct {
	index  IndexConfig
	fields []fieldPath
}

// WithIndex sets what search indexes (see IndexConfig).
func WithIndex(cfg IndexConfig) ItemOption {
	return func(c *itemConfig) error {
		if cfg.Embed != nil && cfg.Dims <= 0 {
			return fmt.Errorf("%w: an index with an embedder needs dims > 0", ErrInvalidArgument)
		}
		if cfg.Embed == nil && cfg.Dims != 0 {
			return fmt.Errorf("%w: index dims %d without an embedder", ErrInvalidArgument, cfg.Dims)
		}
		fields := cfg.Fields
		if len(fields) == 0 {
			fields = []string{"$"}
		}
		paths, err := parseFieldPaths(fields, "index fields")
		if err != nil {
			return err
		}
		c.index, c.fields = cfg, paths
		return nil
	}
}

// ItemsOf returns the item store of a store whose backend keeps items
// (every built-in backend does), tenant-scoped and checked; its clock is
// the engine's (Options.Now). ErrInvalidArgument otherwise.
func ItemsOf(s Store, opts ...ItemOption) (ItemStore, error) {
	cfg := itemConfig{fields: []fieldPath{rootPath}}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if e, ok := s.(*Engine); ok {
		if b, ok := e.b.(driver.ItemBackend); ok {
			return &itemStore{b: sealedItems{ItemBackend: b, ring: e.crypt.ring}, e: e, cfg: cfg}, nil
		}
	}
	if is, ok := s.(ItemStore); ok && len(opts) == 0 {
		return is, nil
	}
	return nil, fmt.Errorf("%w: this store keeps no items", ErrInvalidArgument)
}

// ForTenant returns is with every operation's Tenant set to tenant: what
// a run's nodes get (flow.Items), so they reach no other tenant's items.
func ForTenant(is ItemStore, tenant string) ItemStore {
	if t, ok := is.(tenantItems); ok {
		is = t.is
	}
	return tenantItems{is: is, tenant: tenant}
}

type tenantItems struct {
	is     ItemStore
	tenant string
}

func (t tenantItems) Batch(ctx context.Context, ops []ItemOp) ([]ItemResult, error) {
	scoped := make([]ItemOp, len(ops))
	for i, op := range ops {
		switch o := op.(type) {
		case GetOp:
			o.Tenant, scoped[i] = t.tenant, o
		case PutOp:
			o.Tenant, scoped[i] = t.tenant, o
		case DeleteOp:
			o.Tenant, scoped[i] = t.tenant, o
		case SearchOp:
			o.Tenant, scoped[i] = t.tenant, o
		case ListNamespacesOp:
			o.Tenant, scoped[i] = t.tenant, o
		default:
			scoped[i] = op
		}
	}
	return t.is.Batch(ctx, scoped)
}

func (t tenantItems) Get(ctx context.Context, op GetOp) (Item, error) {
	op.Tenant = t.tenant
	return t.is.Get(ctx, op)
}

func (t tenantItems) Put(ctx context.Context, op PutOp) error {
	op.Tenant = t.tenant
	return t.is.Put(ctx, op)
}

func (t tenantItems) Delete(ctx context.Context, op DeleteOp) error {
	op.Tenant = t.tenant
	return t.is.Delete(ctx, op)
}

func (t tenantItems) Search(ctx context.Context, op SearchOp) ([]Item, error) {
	op.Tenant = t.tenant
	return t.is.Search(ctx, op)
}

func (t tenantItems) ListNamespaces(ctx context.Context, op ListNamespacesOp) ([][]string, error) {
	op.Tenant = t.tenant
	return t.is.ListNamespaces(ctx, op)
}

func (t tenantItems) Sweep(ctx context.Context) (int64, error) { return t.is.Sweep(ctx) }

// JoinNamespace is the form backends store a namespace in: its labels
// joined by "." (labels cannot hold one).
func JoinNamespace(ns []string) string { return strings.Join(ns, ".") }

// SplitNamespace undoes JoinNamespace.
func SplitNamespace(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ".")
}
