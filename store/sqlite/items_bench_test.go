package sqlite_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// hashEmbedder makes 256-dimensional vectors from the words of a text
// (each word adds to the dimensions its hash picks): deterministic, and
// as costly to rank as a real model's.
type hashEmbedder struct{}

func (hashEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 256)
		for _, w := range driver.Terms(t) {
			h := fnv.New32a()
			h.Write([]byte(w))
			s := h.Sum32()
			v[s%256]++
			v[(s/256)%256] -= 0.5
		}
		out[i] = v
	}
	return out, nil
}

var benchWords = []string{"tea", "coffee", "green", "black", "sugar", "milk", "morning", "evening", "likes", "hates", "always", "never"}

// BenchmarkItems measures the memory store on SQLite with 10,000 items of
// 100 users (100 each): a put, a get, and searches in one user's
// namespace (by filter, by text, semantic over 256-dimensional vectors)
// and across every user (by text).
//
//	go test ./store/sqlite -run '^$' -bench Items -benchtime 2000x
func BenchmarkItems(b *testing.B) {
	s, err := sqlite.OpenStore(context.Background(), filepath.Join(b.TempDir(), "items.db"), sqlite.Options{}, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	is, err := store.ItemsOf(s, store.WithIndex(store.IndexConfig{Embed: hashEmbedder{}, Dims: 256, Fields: []string{"text"}}))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for u := range 100 {
		var ops []store.ItemOp
		for k := range 100 {
			text := fmt.Sprintf("user %d %s %s %s item%d", u, benchWords[(u+k)%12], benchWords[(u*7+k)%12], benchWords[k%12], k)
			ops = append(ops, store.PutOp{Namespace: []string{"users", fmt.Sprint("u", u), "notes"}, Key: fmt.Sprint("k", k), Value: map[string]any{"text": text, "n": k}})
		}
		if _, err := is.Batch(ctx, ops); err != nil {
			b.Fatal(err)
		}
	}
	one := []string{"users", "u42"}
	for _, bc := range []struct {
		name string
		fn   func(i int) error
	}{
		{"put", func(i int) error {
			return is.Put(ctx, store.PutOp{Namespace: []string{"users", "u1", "notes"}, Key: fmt.Sprint("new", i), Value: map[string]any{"text": "green tea always"}})
		}},
		{"get", func(i int) error {
			_, err := is.Get(ctx, store.GetOp{Namespace: []string{"users", "u7", "notes"}, Key: fmt.Sprint("k", i%100)})
			return err
		}},
		{"search-user-filter", func(int) error {
			_, err := is.Search(ctx, store.SearchOp{Prefix: one, Filter: map[string]any{"n": map[string]any{"$gte": 90}}})
			return err
		}},
		{"search-user-semantic", func(int) error {
			_, err := is.Search(ctx, store.SearchOp{Prefix: one, Query: "green tea with milk"})
			return err
		}},
		{"search-all-filter", func(int) error {
			_, err := is.Search(ctx, store.SearchOp{Filter: map[string]any{"n": 99}, Limit: 100})
			return err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if err := bc.fn(i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	plain, err := store.ItemsOf(s)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("search-user-text", func(b *testing.B) {
		for b.Loop() {
			if _, err := plain.Search(ctx, store.SearchOp{Prefix: one, Query: "green tea"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("search-all-text", func(b *testing.B) {
		for b.Loop() {
			if _, err := plain.Search(ctx, store.SearchOp{Query: "item7 morning"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
