package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// testItems checks the long-term memory store (store.ItemsOf): items,
// tenants, namespaces, filters, full-text and semantic search, times to
// live, batches and bad input.
func testItems(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"PutGetDelete", testItemCRUD},
		{"Tenants", testItemTenants},
		{"ListNamespaces", testItemNamespaces},
		{"Search", testItemSearch},
		{"TextSearch", testItemText},
		{"Semantic", testItemSemantic},
		{"TTL", testItemTTL},
		{"Batch", testItemBatch},
		{"InvalidInput", testItemInvalid},
		{"Reopen", testItemReopen},
		{"IfAbsent", testItemIfAbsent},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// clock is a settable clock for the engine (store.Options.Now).
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// openItems opens a store on a clock and its item store.
func openItems(t *testing.T, h Harness, opts ...store.ItemOption) (store.Store, store.ItemStore, *clock) {
	t.Helper()
	c := &clock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := h.Open(t, store.Options{Now: c.Now})
	t.Cleanup(func() { _ = s.Close() })
	is, err := store.ItemsOf(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s, is, c
}

func value(t *testing.T, js string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func mustPut(t *testing.T, is store.ItemStore, op store.PutOp) {
	t.Helper()
	if err := is.Put(context.Background(), op); err != nil {
		t.Fatalf("put %v/%s: %v", op.Namespace, op.Key, err)
	}
}

// keysOf lists the keys of items, in order.
func keysOf(items []store.Item) string {
	var ks []string
	for _, it := range items {
		ks = append(ks, it.Key)
	}
	return strings.Join(ks, ",")
}

func search(t *testing.T, is store.ItemStore, op store.SearchOp) string {
	t.Helper()
	items, err := is.Search(context.Background(), op)
	if err != nil {
		t.Fatalf("search %+v: %v", op, err)
	}
	return keysOf(items)
}

func testItemCRUD(t *testing.T, h Harness) {
	_, is, c := openItems(t, h)
	ctx := context.Background()
	ns := []string{"users", "u1", "prefs"}
	v := value(t, `{"theme":"dark","big":12345678901234567890,"nested":{"l":[1,2.5,"ü"]},"none":null}`)
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "ui", Value: v})
	created := c.Now()
	it, err := is.Get(ctx, store.GetOp{Namespace: ns, Key: "ui"})
	if err != nil || jsonOf(it.Value) != jsonOf(v) || !it.CreatedAt.Equal(created) || !it.UpdatedAt.Equal(created) || it.Score != nil {
		t.Fatalf("get: %+v, %v", it, err)
	}
	if fmt.Sprint(it.Namespace) != "[users u1 prefs]" || it.Key != "ui" {
		t.Fatalf("names: %v %q", it.Namespace, it.Key)
	}
	c.add(time.Minute)
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "ui", Value: map[string]any{"theme": "light"}})
	it, err = is.Get(ctx, store.GetOp{Namespace: ns, Key: "ui"})
	if err != nil || it.Value["theme"] != "light" || len(it.Value) != 1 || !it.CreatedAt.Equal(created) || !it.UpdatedAt.Equal(c.Now()) {
		t.Fatalf("overwritten: %+v, %v", it, err)
	}
	if _, err := is.Get(ctx, store.GetOp{Namespace: ns, Key: "other"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	if _, err := is.Get(ctx, store.GetOp{Namespace: []string{"users", "u1"}, Key: "ui"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the parent namespace: %v", err)
	}
	if err := is.Delete(ctx, store.DeleteOp{Namespace: ns, Key: "ui"}); err != nil {
		t.Fatal(err)
	}
	if _, err := is.Get(ctx, store.GetOp{Namespace: ns, Key: "ui"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted: %v", err)
	}
	if err := is.Delete(ctx, store.DeleteOp{Namespace: ns, Key: "ui"}); err != nil {
		t.Fatalf("deleting a missing item: %v", err)
	}
}

// testItemTenants: one key in two tenants is two items; a tenant sees
// only its own in gets, searches and listings.
func testItemTenants(t *testing.T, h Harness) {
	_, is, _ := openItems(t, h)
	ctx := context.Background()
	ns := []string{"memories"}
	mustPut(t, is, store.PutOp{Tenant: "acme", Namespace: ns, Key: "k", Value: map[string]any{"who": "acme"}})
	mustPut(t, is, store.PutOp{Tenant: "globex", Namespace: ns, Key: "k", Value: map[string]any{"who": "globex"}})
	mustPut(t, is, store.PutOp{Tenant: "acme", Namespace: []string{"acme-only"}, Key: "x", Value: map[string]any{"who": "acme"}})
	for _, tenant := range []string{"acme", "globex"} {
		it, err := is.Get(ctx, store.GetOp{Tenant: tenant, Namespace: ns, Key: "k"})
		if err != nil || it.Value["who"] != tenant {
			t.Fatalf("tenant %s: %+v, %v", tenant, it, err)
		}
	}
	if _, err := is.Get(ctx, store.GetOp{Namespace: ns, Key: "k"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the default tenant sees another's item: %v", err)
	}
	if got := search(t, is, store.SearchOp{Tenant: "globex", Query: "acme"}); got != "" {
		t.Fatalf("globex finds acme's items: %s", got)
	}
	if got := search(t, is, store.SearchOp{Tenant: "globex", Filter: map[string]any{"who": "acme"}}); got != "" {
		t.Fatalf("globex's filter finds acme's items: %s", got)
	}
	nss, err := is.ListNamespaces(ctx, store.ListNamespacesOp{Tenant: "globex"})
	if err != nil || fmt.Sprint(nss) != "[[memories]]" {
		t.Fatalf("globex's namespaces: %v, %v", nss, err)
	}
	if err := is.Delete(ctx, store.DeleteOp{Tenant: "globex", Namespace: ns, Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if _, err := is.Get(ctx, store.GetOp{Tenant: "acme", Namespace: ns, Key: "k"}); err != nil {
		t.Fatalf("globex's delete removed acme's item: %v", err)
	}
	scoped := store.ForTenant(is, "globex")
	if _, err := scoped.Get(ctx, store.GetOp{Tenant: "acme", Namespace: ns, Key: "k"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a tenant-scoped store reads another tenant: %v", err)
	}
}

func testItemNamespaces(t *testing.T, h Harness) {
	_, is, _ := openItems(t, h)
	ctx := context.Background()
	for _, ns := range [][]string{{"a", "b", "c"}, {"a", "b", "d"}, {"a", "x", "c"}, {"a-b"}, {"a"}, {"z", "b", "c"}} {
		mustPut(t, is, store.PutOp{Namespace: ns, Key: "k", Value: map[string]any{}})
	}
	mustPut(t, is, store.PutOp{Namespace: []string{"a"}, Key: "k2", Value: map[string]any{}})
	for _, tc := range []struct {
		op   store.ListNamespacesOp
		want string
	}{
		{store.ListNamespacesOp{}, "[[a] [a b c] [a b d] [a x c] [a-b] [z b c]]"},
		{store.ListNamespacesOp{Prefix: []string{"a"}}, "[[a] [a b c] [a b d] [a x c]]"},
		{store.ListNamespacesOp{Prefix: []string{"a", "*", "c"}}, "[[a b c] [a x c]]"},
		{store.ListNamespacesOp{Suffix: []string{"c"}}, "[[a b c] [a x c] [z b c]]"},
		{store.ListNamespacesOp{Suffix: []string{"b", "*"}}, "[[a b c] [a b d] [z b c]]"},
		{store.ListNamespacesOp{Prefix: []string{"a"}, Suffix: []string{"c"}}, "[[a b c] [a x c]]"},
		{store.ListNamespacesOp{MaxDepth: 2}, "[[a] [a b] [a x] [a-b] [z b]]"},
		{store.ListNamespacesOp{Limit: 2, Offset: 1}, "[[a b c] [a b d]]"},
		{store.ListNamespacesOp{Prefix: []string{"nothing"}}, "[]"},
		{store.ListNamespacesOp{Prefix: []string{"a", "b", "c", "d"}}, "[]"},
	} {
		got, err := is.ListNamespaces(ctx, tc.op)
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("list %+v: %v, %v; want %s", tc.op, got, err, tc.want)
		}
	}
}

// testItemSearch: prefixes, filters, the newest-first order and pages.
func testItemSearch(t *testing.T, h Harness) {
	_, is, c := openItems(t, h)
	for i, v := range []string{
		`{"score":4.5,"color":"red","tags":["x","y"],"meta":{"lang":"en","n":1}}`,
		`{"score":3,"color":"blue","tags":["x"],"meta":{"lang":"de","n":2}}`,
		`{"score":10,"color":"red","meta":{"lang":"en","n":3},"none":null}`,
		`{"score":"high","color":"green"}`,
	} {
		c.add(time.Second)
		mustPut(t, is, store.PutOp{Namespace: []string{"docs", "d"}, Key: fmt.Sprintf("k%d", i), Value: value(t, v)})
	}
	mustPut(t, is, store.PutOp{Namespace: []string{"docsx"}, Key: "other", Value: map[string]any{"color": "red"}})
	mustPut(t, is, store.PutOp{Namespace: []string{"docs"}, Key: "top", Value: map[string]any{"color": "red"}})
	for _, tc := range []struct {
		op   store.SearchOp
		want string
	}{
		{store.SearchOp{Prefix: []string{"docs", "d"}}, "k3,k2,k1,k0"},
		{store.SearchOp{Prefix: []string{"docs"}}, "top,k3,k2,k1,k0"},
		{store.SearchOp{}, "top,k3,other,k2,k1,k0"}, // ties (one time) go by namespace, then key
		{store.SearchOp{Prefix: []string{"docs"}, Filter: map[string]any{"color": "red"}}, "top,k2,k0"},
		{store.SearchOp{Prefix: []string{"docs"}, Filter: map[string]any{"score": map[string]any{"$gt": 4}}}, "k2,k0"},
		{store.SearchOp{Prefix: []string{"docs"}, Filter: map[string]any{"score": map[string]any{"$gte": 3, "$lt": 10}}}, "k1,k0"},
		{store.SearchOp{Prefix: []string{"docs"}, Filter: map[string]any{"score": map[string]any{"$lte": 3.0}}}, "k1"},
		{store.SearchOp{Prefix: []string{"docs"}, Filter: map[string]any{"score": map[string]any{"$gt": "a"}}}, "k3"},
		{store.SearchOp{Prefix: []string{"docs"}, Filter: map[string]any{"color": map[string]any{"$ne": "red"}}}, "k3,k1"},
		{store.SearchOp{Prefix: []string{"docs"}, Filter: map[string]any{"score": map[string]any{"$eq": 10}}}, "k2"},
		{store.SearchOp{Prefix: []string{"docs"}, Filter: map[string]any{"meta": map[string]any{"lang": "en"}}}, "k2,k0"},
		{store.SearchOp{Prefix: []string{"docs"}, Filter: map[string]any{"tags": []any{"x"}}}, "k1"},
		{store.SearchOp{Prefix: []string{"docs"}, Filter: map[string]any{"none": nil, "color": "red"}}, "top,k2,k0"},
		{store.SearchOp{Prefix: []string{"docs"}, Filter: map[string]any{"color": "red", "score": 4.5}}, "k0"},
		{store.SearchOp{Prefix: []string{"docs"}, Limit: 2, Offset: 1}, "k3,k2"},
		{store.SearchOp{Prefix: []string{"docs"}, Filter: map[string]any{"color": "red"}, Limit: 1, Offset: 1}, "k2"},
		{store.SearchOp{Prefix: []string{"nothing"}}, ""},
	} {
		if got := search(t, is, tc.op); got != tc.want {
			t.Errorf("search %+v: %s, want %s", tc.op, got, tc.want)
		}
	}
}

// testItemText: a query keeps the items holding every word, in any case;
// only the indexed fields count; NoIndex items are found by filters only.
func testItemText(t *testing.T, h Harness) {
	_, is, _ := openItems(t, h)
	ns := []string{"notes"}
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "a", Value: map[string]any{"text": "Alice likes green Tea", "n": 1}})
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "b", Value: map[string]any{"text": "Bob likes coffee; Bob likes tea too", "n": 2}})
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "c", Value: map[string]any{"title": "tea", "body": "coffee"}, Index: []string{"body"}})
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "d", Value: map[string]any{"text": "tea"}, NoIndex: true})
	mustPut(t, is, store.PutOp{Namespace: ns, Key: "e", Value: map[string]any{"tags": []any{"Tea", map[string]any{"x": "zebra"}}, "n": 3}})
	for _, tc := range []struct {
		op   store.SearchOp
		want string
	}{
		{store.SearchOp{Query: "tea"}, "a,b,e"},
		{store.SearchOp{Query: "TEA likes"}, "a,b"},
		{store.SearchOp{Query: "coffee"}, "b,c"},
		{store.SearchOp{Query: "zebra"}, "e"},
		{store.SearchOp{Query: "tea", Filter: map[string]any{"n": map[string]any{"$gte": 2}}}, "b,e"},
		{store.SearchOp{Query: "nothing here"}, ""},
		{store.SearchOp{Query: "?!"}, ""},
		{store.SearchOp{Filter: map[string]any{"text": "tea"}}, "d"},
	} {
		items, err := is.Search(context.Background(), tc.op)
		if err != nil {
			t.Fatal(err)
		}
		got := slices.Sorted(strings.SplitSeq(keysOf(items), ",")) // the rank order is the backend's
		if strings.Join(got, ",") != tc.want {
			t.Errorf("search %+v: %v, want %s", tc.op, got, tc.want)
		}
		for _, it := range items {
			if tc.op.Query != "" && it.Score == nil {
				t.Errorf("search %+v: %s has no score", tc.op, it.Key)
			}
		}
	}
	// Pages of a ranked result are slices of it.
	all := search(t, is, store.SearchOp{Query: "tea likes"})
	var paged []string
	for off := 0; off < 3; off++ {
		if p := search(t, is, store.SearchOp{Query: "tea likes", Limit: 1, Offset: off}); p != "" {
			paged = append(paged, p)
		}
	}
	if strings.Join(paged, ",") != all {
		t.Errorf("pages %v of %s", paged, all)
	}
}
