package store_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// Items kept across threads: put, get, a search with a filter and a
// text query, the namespaces, and a batch whose get sees the store as it
// was before the batch's delete.
func ExampleItemsOf() {
	s := inmem.Open(store.Options{})
	defer s.Close()
	items, err := store.ItemsOf(s)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	ada := []string{"users", "ada", "notes"}
	_ = items.Put(ctx, store.PutOp{Namespace: ada, Key: "drinks", Value: map[string]any{"text": "Green tea, no sugar", "stars": 5}})
	_ = items.Put(ctx, store.PutOp{Namespace: ada, Key: "music", Value: map[string]any{"text": "Bach, loud", "stars": 4}, TTL: 30 * 24 * time.Hour})
	_ = items.Put(ctx, store.PutOp{Namespace: []string{"users", "bob", "notes"}, Key: "drinks", Value: map[string]any{"text": "Black coffee", "stars": 3}})

	it, _ := items.Get(ctx, store.GetOp{Namespace: ada, Key: "drinks"})
	fmt.Println(it.Value["text"])
	found, _ := items.Search(ctx, store.SearchOp{Prefix: []string{"users"}, Filter: map[string]any{"stars": map[string]any{"$gte": 4}}, Query: "tea"})
	for _, f := range found {
		fmt.Println(f.Namespace, f.Key)
	}
	nss, _ := items.ListNamespaces(ctx, store.ListNamespacesOp{Prefix: []string{"users"}, MaxDepth: 2})
	fmt.Println(nss)
	res, _ := items.Batch(ctx, []store.ItemOp{
		store.DeleteOp{Namespace: ada, Key: "music"},
		store.GetOp{Namespace: ada, Key: "music"},
	})
	fmt.Println(res[1].Item.Value["text"])
	_, err = items.Get(ctx, store.GetOp{Namespace: ada, Key: "music"})
	fmt.Println(err)
	// Output:
	// Green tea, no sugar
	// [users ada notes] drinks
	// [[users ada] [users bob]]
	// Bach, loud
	// store: not found: item "music" in namespace "users.ada.notes"
}
