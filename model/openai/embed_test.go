package openai_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/internal/embedtest"
	"github.com/cairn-dev/cairn/model/openai"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

func embedder(t testing.TB, url, env string) *openai.Embedder {
	t.Helper()
	e, err := openai.NewEmbedder(openai.Config{BaseURL: url, Model: "text-embedding-test", APIKeyEnv: "TEST_KEY", Timeout: 5 * time.Second,
		Getenv: func(k string) string {
			if k == "TEST_KEY" {
				return env
			}
			return ""
		}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var _ store.Embedder = (*openai.Embedder)(nil)

// TestEmbedderWireFormat: the embedder sends the model, the texts as an
// array and asks for floats, with the key as a bearer token; it returns
// the vectors in order, in requests of at most 256 texts.
func TestEmbedderWireFormat(t *testing.T) {
	srv := embedtest.New(t, key)
	e := embedder(t, srv.URL, key)
	ctx := context.Background()
	vs, err := e.Embed(ctx, []string{"apple dog", "Cat cat car"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(vs) != fmt.Sprint([][]float32{embedtest.Vector("apple dog"), embedtest.Vector("Cat cat car")}) {
		t.Fatalf("vectors %v", vs)
	}
	req := srv.Requests()[0]
	if req.Model != "text-embedding-test" || req.EncodingFormat != "float" || fmt.Sprint(req.Input) != "[apple dog Cat cat car]" {
		t.Fatalf("request %+v", req)
	}
	many := make([]string, 300)
	for i := range many {
		many[i] = strings.Repeat("apple ", i%5+1)
	}
	vs, err = e.Embed(ctx, many)
	if err != nil || len(vs) != 300 || vs[299][0] != 5 || vs[7][0] != 3 {
		t.Fatalf("300 texts: %d vectors, %v", len(vs), err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("%d requests, want 1 + 2 (256 texts at most each)", n)
	}
}

func TestEmbedderErrors(t *testing.T) {
	srv := embedtest.New(t, key)
	ctx := context.Background()
	wrong := "sk-wrong-SECRET-000000"
	_, err := embedder(t, srv.URL, wrong).Embed(ctx, []string{"x"})
	if !errors.Is(err, agent.ErrAuth) || strings.Contains(err.Error(), wrong) {
		t.Fatalf("a wrong key: %v", err)
	}
	srv.FailNext(1)
	if _, err := embedder(t, srv.URL, key).Embed(ctx, []string{"x"}); !errors.Is(err, agent.ErrServer) {
		t.Fatalf("a failing server: %v", err)
	}
	if _, err := openai.NewEmbedder(openai.Config{Model: "m", Getenv: func(string) string { return "" }}); !errors.Is(err, openai.ErrConfig) {
		t.Fatalf("OpenAI itself without a key: %v", err)
	}
}

// TestEmbedderCosineRanking: an item store indexing the "text" field with
// the embedder ranks items by the cosine similarity of their vectors
// (from the endpoint) to the query's; other fields are never sent.
func TestEmbedderCosineRanking(t *testing.T) {
	srv := embedtest.New(t, key)
	s := inmem.Open(store.Options{})
	is, err := store.ItemsOf(s, store.WithIndex(store.IndexConfig{Embed: embedder(t, srv.URL, key), Dims: embedtest.Dims, Fields: []string{"text"}}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := []string{"docs"}
	for k, text := range map[string]string{"a": "apple apple banana", "b": "banana cherry", "c": "dog cat", "d": "tea"} {
		if err := is.Put(ctx, store.PutOp{Namespace: ns, Key: k, Value: map[string]any{"text": text, "secret": "never embedded"}}); err != nil {
			t.Fatal(err)
		}
	}
	items, err := is.Search(ctx, store.SearchOp{Prefix: ns, Query: "apple banana"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, fmt.Sprintf("%s %.3f", it.Key, *it.Score))
	}
	// The query is (apple 1, banana 1): a (2, 1) scores 3/√10, b (0, 1,
	// cherry 1) 1/2, c and d share no word (0, then by key).
	if want := "[a 0.949 b 0.500 c 0.000 d 0.000]"; fmt.Sprint(got) != want {
		t.Fatalf("ranking %v, want %s", got, want)
	}
	for _, text := range srv.Texts() {
		if strings.Contains(text, "never embedded") {
			t.Fatalf("a field outside the index was embedded: %q", text)
		}
	}
}

// An embedder for the item store's semantic search.
func ExampleNewEmbedder() {
	emb, err := openai.NewEmbedder(openai.Config{Model: "text-embedding-3-small"}) // the key from OPENAI_API_KEY
	if err != nil {
		fmt.Println(err)
		return
	}
	s := inmem.Open(store.Options{})
	items, _ := store.ItemsOf(s, store.WithIndex(store.IndexConfig{Embed: emb, Dims: 1536, Fields: []string{"text"}}))
	_ = items.Put(context.Background(), store.PutOp{Namespace: []string{"docs"}, Key: "intro", Value: map[string]any{"text": "Cairn keeps state"}})
}
