package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// WordEmbedder is a deterministic store.Embedder for tests: a text's
// vector counts the words of Vocabulary it holds (one dimension each), so
// cosine similarity follows shared words. It records the texts it was
// asked for, and fails while Fail is set.
type WordEmbedder struct {
	mu    sync.Mutex
	Calls [][]string
	Fail  bool
	// Extra adds dimensions to every vector (a wrong-sized answer).
	Extra int
}

// Vocabulary are the words WordEmbedder counts.
var Vocabulary = []string{"apple", "banana", "cherry", "dog", "cat", "car"}

// Embed implements store.Embedder.
func (e *WordEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.Calls = append(e.Calls, append([]string(nil), texts...))
	if e.Fail {
		return nil, errors.New("the embeddings endpoint is down")
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, len(Vocabulary)+e.Extra)
		for _, w := range driver.Terms(t) {
			for j, voc := range Vocabulary {
				if w == voc {
					v[j]++
				}
			}
		}
		out[i] = v
	}
	return out, nil
}

func (e *WordEmbedder) last() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.Calls) == 0 {
		return nil
	}
	return e.Calls[len(e.Calls)-1]
}

// putSemanticItems writes the items the semantic tests rank.
func putSemanticItems(t *testing.T, is store.ItemStore, emb *WordEmbedder) {
	t.Helper()
	ns := []string{"kb"}
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "fruit1", Value: map[string]any{"text": "apple apple banana", "kind": "fruit"}})
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "fruit2", Value: map[string]any{"text": "banana cherry", "kind": "fruit"}})
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "pet", Value: map[string]any{"text": "dog cat", "kind": "pet", "note": "apple"}})
	if got := fmt.Sprint(emb.last()); got != "[dog cat]" {
		t.Fatalf("embedded %s for the pet: only the index's fields are embedded", got)
	}
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "noidx", Value: map[string]any{"text": "apple"}, NoIndex: true})
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "multi", Value: map[string]any{"text": "car", "tags": []any{"apple", "dog"}}, Index: []string{"tags[*]"}})
	if got := fmt.Sprint(emb.last()); got != "[apple dog]" {
		t.Fatalf("embedded %s for tags[*]", got)
	}
}

// checkSemantic checks the ranking of putSemanticItems' items.
func checkSemantic(t *testing.T, is store.ItemStore) {
	t.Helper()
	for _, tc := range []struct {
		op   store.SearchOp
		want string
	}{
		{store.SearchOp{Query: "apple"}, "multi,fruit1,fruit2,pet"},
		{store.SearchOp{Query: "cat dog"}, "pet,multi,fruit1,fruit2"},
		{store.SearchOp{Query: "apple", Filter: map[string]any{"kind": "fruit"}}, "fruit1,fruit2"},
		{store.SearchOp{Query: "apple", Limit: 1, Offset: 1}, "fruit1"},
		{store.SearchOp{Prefix: []string{"kb"}, Filter: map[string]any{"text": "apple"}}, "noidx"},
	} {
		if got := search(t, is, tc.op); got != tc.want {
			t.Errorf("search %+v: %s, want %s", tc.op, got, tc.want)
		}
	}
	items, err := is.Search(context.Background(), store.SearchOp{Query: "apple", Limit: 2})
	if err != nil || len(items) != 2 || items[0].Score == nil || items[1].Score == nil {
		t.Fatalf("scores: %+v, %v", items, err)
	}
	if a, b := *items[0].Score, *items[1].Score; a < 0.9999 || a > 1.0001 || b < 0.894 || b > 0.895 {
		t.Fatalf("cosine scores %v, %v; want 1 and 2/√5", a, b)
	}
}

// testItemSemantic ranks by the cosine similarity of the query's vector to
// the best of each item's, indexing only the fields asked for; an
// embedder that fails or answers the wrong size writes nothing.
func testItemSemantic(t *testing.T, h Harness) {
	emb := &WordEmbedder{}
	_, is, c := openItems(t, h, store.WithIndex(store.IndexConfig{Embed: emb, Dims: len(Vocabulary), Fields: []string{"text"}}))
	putSemanticItems(t, is, emb)
	c.add(time.Second)
	checkSemantic(t, is)
	ctx := context.Background()
	emb.Fail = true
	err := is.Put(ctx, store.PutOp{Namespace: []string{"kb"}, Key: "x", Value: map[string]any{"text": "cat"}})
	if !errors.Is(err, store.ErrEmbedding) {
		t.Fatalf("a failing embedder: %v", err)
	}
	if _, err := is.Search(ctx, store.SearchOp{Query: "cat"}); !errors.Is(err, store.ErrEmbedding) {
		t.Fatalf("a failing embedder on a search: %v", err)
	}
	emb.Fail, emb.Extra = false, 1
	if err := is.Put(ctx, store.PutOp{Namespace: []string{"kb"}, Key: "x", Value: map[string]any{"text": "cat"}}); !errors.Is(err, store.ErrEmbedding) {
		t.Fatalf("vectors of the wrong size: %v", err)
	}
	emb.Extra = 0
	if _, err := is.Get(ctx, store.GetOp{Namespace: []string{"kb"}, Key: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a put whose embedding failed wrote: %v", err)
	}
	n := len(emb.Calls)
	mustPut(t, is, store.PutOp{Namespace: []string{"kb"}, Key: "quiet", Value: map[string]any{"text": "cat"}, NoIndex: true})
	if len(emb.Calls) != n {
		t.Fatal("a put with NoIndex called the embedder")
	}
}

// testItemTTL: an item expires its TTL after it was last written or read
// (reads refresh it unless they say not to); an expired item is never
// returned, and a sweep deletes it.
func testItemTTL(t *testing.T, h Harness) {
	_, is, c := openItems(t, h)
	ctx := context.Background()
	tmp, keep := []string{"tmp"}, []string{"keep"}
	mustPut(t, is, store.PutOp{Namespace: tmp, Key: "t", Value: map[string]any{"v": 1}, TTL: time.Minute})
	mustPut(t, is, store.PutOp{Namespace: keep, Key: "forever", Value: map[string]any{"v": 2}})
	get := func(ns []string, key string, noRefresh bool) error {
		_, err := is.Get(ctx, store.GetOp{Namespace: ns, Key: key, NoRefresh: noRefresh})
		return err
	}
	c.add(50 * time.Second)
	if err := get(tmp, "t", false); err != nil {
		t.Fatalf("before it expires: %v", err)
	}
	c.add(50 * time.Second) // 100 s after the put, 50 s after the read that refreshed it
	if err := get(tmp, "t", true); err != nil {
		t.Fatalf("a read refreshed it: %v", err)
	}
	c.add(20 * time.Second) // 70 s after the last refresh
	if err := get(tmp, "t", false); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expired: %v", err)
	}
	if got := search(t, is, store.SearchOp{}); got != "forever" {
		t.Fatalf("search shows %s", got)
	}
	if nss, err := is.ListNamespaces(ctx, store.ListNamespacesOp{}); err != nil || fmt.Sprint(nss) != "[[keep]]" {
		t.Fatalf("namespaces: %v, %v", nss, err)
	}
	if n, err := is.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if n, err := is.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep again: %d, %v", n, err)
	}
	checkSearchRefresh(t, is, c)
	// A put over an expired item that no sweep removed yet starts a new one.
	mustPut(t, is, store.PutOp{Namespace: tmp, Key: "t2", Value: map[string]any{}, TTL: time.Minute})
	c.add(2 * time.Minute)
	mustPut(t, is, store.PutOp{Namespace: tmp, Key: "t2", Value: map[string]any{}})
	if it, err := is.Get(ctx, store.GetOp{Namespace: tmp, Key: "t2"}); err != nil || !it.CreatedAt.Equal(c.Now()) {
		t.Fatalf("a put over an expired item: %+v, %v", it, err)
	}
}

// checkSearchRefresh: searches refresh the items they return.
func checkSearchRefresh(t *testing.T, is store.ItemStore, c *clock) {
	t.Helper()
	ns := []string{"s"}
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "s", Value: map[string]any{"text": "refreshed"}, TTL: time.Minute})
	c.add(40 * time.Second)
	if got := search(t, is, store.SearchOp{Prefix: ns, Query: "refreshed"}); got != "s" {
		t.Fatalf("search: %s", got)
	}
	c.add(40 * time.Second)
	if got := search(t, is, store.SearchOp{Prefix: ns, NoRefresh: true}); got != "s" {
		t.Fatalf("the search refreshed nothing: %s", got)
	}
	c.add(40 * time.Second)
	if got := search(t, is, store.SearchOp{Prefix: ns}); got != "" {
		t.Fatalf("a search without refresh refreshed: %s", got)
	}
}

// testItemBatch: reads see the store as it was; the last write of a key
// wins; a bad operation stops the batch before anything is written.
func testItemBatch(t *testing.T, h Harness) {
	_, is, _ := openItems(t, h)
	ctx := context.Background()
	ns := []string{"b"}
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "k1", Value: map[string]any{"v": 1}})
	res, err := is.Batch(ctx, []store.ItemOp{
		store.GetOp{Namespace: ns, Key: "k1"},
		store.PutOp{Namespace: ns, Key: "k1", Value: map[string]any{"v": 2}},
		store.GetOp{Namespace: ns, Key: "k1"},
		store.PutOp{Namespace: ns, Key: "k2", Value: map[string]any{"v": 3}},
		store.DeleteOp{Namespace: ns, Key: "k2"},
		store.DeleteOp{Namespace: ns, Key: "k3"},
		store.PutOp{Namespace: ns, Key: "k3", Value: map[string]any{"v": 4}},
		store.SearchOp{Prefix: ns},
		store.ListNamespacesOp{},
		store.GetOp{Namespace: ns, Key: "none"},
	})
	if err != nil || len(res) != 10 {
		t.Fatalf("batch: %v, %v", res, err)
	}
	if jsonOf(res[0].Item.Value) != `{"v":1}` || jsonOf(res[2].Item.Value) != `{"v":1}` || keysOf(res[7].Items) != "k1" ||
		fmt.Sprint(res[8].Namespaces) != "[[b]]" || res[9].Item != nil || res[1].Item != nil {
		t.Fatalf("batch results: %+v", res)
	}
	if got := search(t, is, store.SearchOp{Prefix: ns}); got != "k3,k1" && got != "k1,k3" {
		t.Fatalf("after the batch: %s", got)
	}
	if it, err := is.Get(ctx, store.GetOp{Namespace: ns, Key: "k1"}); err != nil || jsonOf(it.Value) != `{"v":2}` {
		t.Fatalf("k1: %+v, %v", it, err)
	}
	_, err = is.Batch(ctx, []store.ItemOp{
		store.PutOp{Namespace: ns, Key: "k9", Value: map[string]any{}},
		store.DeleteOp{Namespace: ns, Key: "k1"},
		store.PutOp{Namespace: []string{"bad.label"}, Key: "k", Value: map[string]any{}},
	})
	if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), "operation 2") {
		t.Fatalf("a batch with a bad operation: %v", err)
	}
	if got := search(t, is, store.SearchOp{Prefix: ns}); got != "k3,k1" && got != "k1,k3" {
		t.Fatalf("a refused batch wrote: %s", got)
	}
}

func testItemInvalid(t *testing.T, h Harness) {
	_, is, _ := openItems(t, h)
	ctx := context.Background()
	v := map[string]any{}
	for _, tc := range []struct {
		name string
		op   store.ItemOp
		want error
	}{
		{"empty namespace", store.PutOp{Key: "k", Value: v}, store.ErrInvalidArgument},
		{"period", store.PutOp{Namespace: []string{"a.b"}, Key: "k", Value: v}, store.ErrInvalidArgument},
		{"empty label", store.PutOp{Namespace: []string{"a", ""}, Key: "k", Value: v}, store.ErrInvalidArgument},
		{"langgraph root", store.PutOp{Namespace: []string{"langgraph"}, Key: "k", Value: v}, store.ErrInvalidArgument},
		{"NUL", store.PutOp{Namespace: []string{"a\x00"}, Key: "k", Value: v}, store.ErrInvalidArgument},
		{"bad UTF-8", store.GetOp{Namespace: []string{"a"}, Key: "\xff"}, store.ErrInvalidArgument},
		{"empty key", store.PutOp{Namespace: []string{"a"}, Value: v}, store.ErrInvalidArgument},
		{"long key", store.GetOp{Namespace: []string{"a"}, Key: strings.Repeat("k", 1025)}, store.ErrInvalidArgument},
		{"nil value", store.PutOp{Namespace: []string{"a"}, Key: "k"}, store.ErrInvalidArgument},
		{"negative ttl", store.PutOp{Namespace: []string{"a"}, Key: "k", Value: v, TTL: -time.Second}, store.ErrInvalidArgument},
		{"bad index path", store.PutOp{Namespace: []string{"a"}, Key: "k", Value: v, Index: []string{"a[x]"}}, store.ErrInvalidArgument},
		{"unencodable value", store.PutOp{Namespace: []string{"a"}, Key: "k", Value: map[string]any{"f": func() {}}}, store.ErrInvalidArgument},
		{"bad tenant", store.GetOp{Tenant: "no spaces", Namespace: []string{"a"}, Key: "k"}, store.ErrInvalidID},
		{"negative limit", store.SearchOp{Limit: -1}, store.ErrInvalidArgument},
		{"unknown operator", store.SearchOp{Filter: map[string]any{"a": map[string]any{"$in": []any{1}}}}, store.ErrInvalidArgument},
		{"operator at the top", store.SearchOp{Filter: map[string]any{"$eq": 1}}, store.ErrInvalidArgument},
		{"ordering an object", store.SearchOp{Filter: map[string]any{"a": map[string]any{"$gt": map[string]any{}}}}, store.ErrInvalidArgument},
		{"operators and fields", store.SearchOp{Filter: map[string]any{"a": map[string]any{"$gt": 1, "b": 2}}}, store.ErrInvalidArgument},
		{"period in a prefix", store.SearchOp{Prefix: []string{"a.b"}}, store.ErrInvalidArgument},
		{"negative depth", store.ListNamespacesOp{MaxDepth: -1}, store.ErrInvalidArgument},
		{"nil operation", nil, store.ErrInvalidArgument},
	} {
		if _, err := is.Batch(ctx, []store.ItemOp{tc.op}); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	var fe *store.FilterError
	if _, err := is.Search(ctx, store.SearchOp{Filter: map[string]any{"score": map[string]any{"$gt": true}}}); !errors.As(err, &fe) || fe.Path != "score.$gt" {
		t.Errorf("filter error: %v", err)
	}
	if got := search(t, is, store.SearchOp{}); got != "" {
		t.Fatalf("refused operations wrote %s", got)
	}
}

// testItemReopen: items, their text index and their vectors survive
// closing the store; a closed store refuses.
func testItemReopen(t *testing.T, h Harness) {
	s := h.Open(t, store.Options{})
	emb := &WordEmbedder{}
	index := store.WithIndex(store.IndexConfig{Embed: emb, Dims: len(Vocabulary), Fields: []string{"text"}})
	is, err := store.ItemsOf(s, index)
	if err != nil {
		t.Fatal(err)
	}
	putSemanticItems(t, is, emb)
	if h.Reopen != nil {
		s = h.Reopen(t, s)
		if is, err = store.ItemsOf(s, index); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // the items were updated before now
		checkSemantic(t, is)
		plain, err := store.ItemsOf(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := search(t, plain, store.SearchOp{Query: "cherry"}); got != "fruit2" {
			t.Fatalf("text search after reopening: %s", got)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := is.Get(context.Background(), store.GetOp{Namespace: []string{"kb"}, Key: "pet"}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("a closed store: %v", err)
	}
}

// testItemIfAbsent: a put IfAbsent claims a key once; a second claim is
// ErrConflict and its whole batch writes nothing; a delete in the same
// batch frees the key. A system tenant's items are apart from the
// tenant's own.
func testItemIfAbsent(t *testing.T, h Harness) {
	ctx := context.Background()
	_, is, _ := openItems(t, h)
	sys := store.SystemTenant("assistants", "acme")
	claim := store.PutOp{Tenant: sys, Namespace: []string{"versions", "a1"}, Key: "1", Value: map[string]any{"v": "first"}, IfAbsent: true}
	if _, err := is.Batch(ctx, []store.ItemOp{claim}); err != nil {
		t.Fatal(err)
	}
	second := claim
	second.Value = map[string]any{"v": "second"}
	other := store.PutOp{Tenant: sys, Namespace: []string{"current"}, Key: "a1", Value: map[string]any{"v": "second"}}
	if _, err := is.Batch(ctx, []store.ItemOp{other, second}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second claim: %v, want ErrConflict", err)
	}
	if it, err := is.Get(ctx, store.GetOp{Tenant: sys, Namespace: []string{"current"}, Key: "a1"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused batch wrote %v (%v)", it, err)
	}
	if _, err := is.Batch(ctx, []store.ItemOp{store.DeleteOp{Tenant: sys, Namespace: claim.Namespace, Key: "1"}, second}); err != nil {
		t.Fatalf("a claim after a delete in its batch: %v", err)
	}
	it, err := is.Get(ctx, store.GetOp{Tenant: sys, Namespace: claim.Namespace, Key: "1"})
	if err != nil || it.Value["v"] != "second" {
		t.Fatalf("the claimed item: %v, %v", it, err)
	}
	if items, err := is.Search(ctx, store.SearchOp{Tenant: "acme", Limit: 10}); err != nil || len(items) != 0 {
		t.Fatalf("tenant acme sees its system items: %v, %v", items, err)
	}
	if err := is.Put(ctx, store.PutOp{Tenant: "other#acme", Namespace: []string{"x"}, Key: "k", Value: map[string]any{}}); !errors.Is(err, store.ErrInvalidID) {
		t.Fatalf("an unknown system kind: %v, want ErrInvalidID", err)
	}
}
