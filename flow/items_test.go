package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// A node remembers what a user likes in the long-term memory store; a run
// on another thread finds it there.
func ExampleItems() {
	schema := state.MustSchema(state.WithField("answer", state.ReducerReplace))
	g, _ := flow.NewGraph(schema).
		AddNode("remember", func(ctx context.Context, d state.Doc) (state.Update, error) {
			items, err := flow.Items(ctx)
			if err != nil {
				return nil, err
			}
			var like string
			if d.Get("like", &like) == nil && like != "" {
				err := items.Put(ctx, store.PutOp{Namespace: []string{"users", "ada", "likes"}, Key: like, Value: map[string]any{"text": "Ada likes " + like}})
				return state.Update{"answer": "noted"}, err
			}
			found, err := items.Search(ctx, store.SearchOp{Prefix: []string{"users", "ada"}, Query: "likes"})
			if err != nil {
				return nil, err
			}
			var all []string
			for _, it := range found {
				all = append(all, it.Value["text"].(string))
			}
			return state.Update{"answer": all}, nil
		}).
		Chain("remember").Compile()
	r, _ := flow.NewRunner(g, inmem.Open(store.Options{}), flow.Options{})
	ctx := context.Background()
	_, _ = r.Invoke(ctx, "monday", state.Update{"like": "tea"})
	res, err := r.Invoke(ctx, "tuesday", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.State)
	// Output: {"answer":["Ada likes tea"]}
}

// TestItemsTenant: a node's items are those of its thread's tenant; the
// runner's Options.Items, when set, is the store nodes reach.
func TestItemsTenant(t *testing.T) {
	s := inmem.Open(store.Options{})
	ctx := context.Background()
	for _, th := range []store.Thread{{ID: "a", Tenant: "acme"}, {ID: "g", Tenant: "globex"}} {
		if _, err := s.CreateThread(ctx, th); err != nil {
			t.Fatal(err)
		}
	}
	schema := state.MustSchema(state.WithField("seen", state.ReducerReplace))
	g, err := flow.NewGraph(schema).AddNode("n", func(ctx context.Context, d state.Doc) (state.Update, error) {
		items, err := flow.Items(ctx)
		if err != nil {
			return nil, err
		}
		var put bool
		if d.Get("put", &put) == nil && put {
			return nil, items.Put(ctx, store.PutOp{Tenant: "someone-else", Namespace: []string{"m"}, Key: "k", Value: map[string]any{"v": 1}})
		}
		_, err = items.Get(ctx, store.GetOp{Namespace: []string{"m"}, Key: "k"})
		return state.Update{"seen": err == nil}, nil
	}).Chain("n").Compile()
	if err != nil {
		t.Fatal(err)
	}
	all, _ := store.ItemsOf(s)
	for _, opts := range []flow.Options{{}, {Items: all}} {
		r, err := flow.NewRunner(g, s, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Invoke(ctx, "a", state.Update{"put": true}); err != nil {
			t.Fatal(err)
		}
		if _, err := all.Get(ctx, store.GetOp{Tenant: "acme", Namespace: []string{"m"}, Key: "k"}); err != nil {
			t.Fatalf("the item of thread a is not acme's: %v", err)
		}
		for thread, want := range map[string]string{"a": "true", "g": "false", "new": "false"} {
			res, err := r.Invoke(ctx, thread, state.Update{"put": false})
			if err != nil || fmt.Sprint(res.State.String()) != `{"put":false,"seen":`+want+`}` {
				t.Fatalf("thread %s: %s, %v", thread, res.State, err)
			}
		}
		if err := all.Delete(ctx, store.DeleteOp{Tenant: "acme", Namespace: []string{"m"}, Key: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := flow.Items(ctx); !errors.Is(err, flow.ErrInvalidGraph) {
		t.Fatalf("outside a node: %v", err)
	}
}

// TestItemsRedacted: what a node writes to the memory store goes through
// the run's redactor.
func TestItemsRedacted(t *testing.T) {
	s := inmem.Open(store.Options{})
	red, err := redact.New(redact.Config{})
	if err != nil {
		t.Fatal(err)
	}
	schema := state.MustSchema(state.WithField("x", state.ReducerReplace))
	g, err := flow.NewGraph(schema).AddNode("n", func(ctx context.Context, d state.Doc) (state.Update, error) {
		items, err := flow.Items(ctx)
		if err != nil {
			return nil, err
		}
		if err := items.Put(ctx, store.PutOp{Namespace: []string{"m"}, Key: "put", Value: map[string]any{"api_key": "sk-live-0123456789abcdefghij", "note": "fine"}}); err != nil {
			return nil, err
		}
		_, err = items.Batch(ctx, []store.ItemOp{store.PutOp{Namespace: []string{"m"}, Key: "batch", Value: map[string]any{"text": "token sk-live-0123456789abcdefghij"}}})
		return nil, err
	}).Chain("n").Compile()
	if err != nil {
		t.Fatal(err)
	}
	r, err := flow.NewRunner(g, s, flow.Options{Redact: red})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Invoke(context.Background(), "t", nil); err != nil {
		t.Fatal(err)
	}
	all, _ := store.ItemsOf(s)
	items, err := all.Search(context.Background(), store.SearchOp{Prefix: []string{"m"}})
	if err != nil || len(items) != 2 {
		t.Fatalf("items %v, %v", items, err)
	}
	for _, it := range items {
		if b, _ := json.Marshal(it.Value); strings.Contains(string(b), "sk-live") || !strings.Contains(string(b), redact.Replacement) {
			t.Fatalf("item %s stored %s", it.Key, b)
		}
	}
}
