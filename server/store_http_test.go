package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/server"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
	"github.com/cairn-dev/cairn/store/storetest"
)

// storeAPI is a server over a memory store on a settable clock.
type storeAPI struct {
	t   *testing.T
	url string
	key string
	mu  sync.Mutex
	now time.Time
	s   store.Store
}

func (a *storeAPI) clock() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.now
}

func (a *storeAPI) advance(d time.Duration) {
	a.mu.Lock()
	a.now = a.now.Add(d)
	a.mu.Unlock()
}

func newStoreAPI(t *testing.T, configure func(*server.Config, store.Store)) *storeAPI {
	t.Helper()
	a := &storeAPI{t: t, now: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)}
	a.s = inmem.Open(store.Options{Now: a.clock})
	cfg := server.Config{Store: a.s}
	if configure != nil {
		configure(&cfg, a.s)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.url = newHTTP(t, srv)
	return a
}

// do sends a request with a JSON body (nil: none) and returns the status
// and the body.
func (a *storeAPI) do(method, path, body string) (int, string) {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	if a.key != "" {
		req.Header.Set("x-api-key", a.key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b))
}

func (a *storeAPI) want(method, path, body string, code int, contains ...string) string {
	a.t.Helper()
	got, b := a.do(method, path, body)
	if got != code {
		a.t.Fatalf("%s %s %s: %d %s, want %d", method, path, body, got, b, code)
	}
	for _, c := range contains {
		if !strings.Contains(b, c) {
			a.t.Fatalf("%s %s %s: %s lacks %s", method, path, body, b, c)
		}
	}
	return b
}

// TestStoreAPI drives the /store routes as LangGraph's SDKs call them.
func TestStoreAPI(t *testing.T) {
	a := newStoreAPI(t, nil)
	a.want("PUT", "/store/items", `{"namespace":["users","u1"],"key":"prefs","value":{"theme":"dark","big":12345678901234567890,"n":{"x":[1,2.5]}}}`, 204)
	got := a.want("GET", "/store/items?namespace=users.u1&key=prefs", "", 200)
	var it map[string]any
	if err := json.Unmarshal([]byte(got), &it); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, `"big":12345678901234567890`) || it["created_at"] != "2025-03-04T05:06:07.000000Z" || it["updated_at"] != it["created_at"] ||
		it["key"] != "prefs" || strings.Join(toStrings(it["namespace"]), ".") != "users.u1" {
		t.Fatalf("item %s", got)
	}
	if _, ok := it["score"]; ok {
		t.Fatalf("an item read by key has a score: %s", got)
	}
	a.want("GET", "/store/items?namespace=users.u1&key=none", "", 200, "null")
	a.want("PUT", "/store/items", `{"namespace":["users","u2"],"key":"prefs","value":{"theme":"light","stars":4,"text":"likes green tea"},"index":["text"]}`, 204)
	a.want("PUT", "/store/items", `{"namespace":["users","u2","notes"],"key":"n1","value":{"text":"tea again","stars":2},"index":false}`, 204)
	a.want("POST", "/store/items/search", `{"namespace_prefix":["users"],"filter":{"stars":{"$gte":3}}}`, 200, `"key":"prefs"`, `"theme":"light"`, `"score":null`)
	b := a.want("POST", "/store/items/search", `{"namespace_prefix":["users"],"query":"TEA"}`, 200, `"theme":"light"`, `"score":`)
	if strings.Contains(b, `"n1"`) || strings.Contains(b, `"score":null`) {
		t.Fatalf("a text search: %s", b)
	}
	a.want("POST", "/store/items/search", `{"namespace_prefix":["users"],"limit":1,"offset":1}`, 200, `"key":"prefs"`, `"theme":"light"`)
	a.want("POST", "/store/items/search", `{"namespace_prefix":["nobody"]}`, 200, `{"items":[]}`)
	a.want("POST", "/store/namespaces", `{}`, 200, `{"namespaces":[["users","u1"],["users","u2"],["users","u2","notes"]]}`)
	a.want("POST", "/store/namespaces", `{"prefix":["users","*"],"suffix":["notes"]}`, 200, `{"namespaces":[["users","u2","notes"]]}`)
	a.want("POST", "/store/namespaces", `{"max_depth":2,"limit":1,"offset":1}`, 200, `{"namespaces":[["users","u2"]]}`)
	a.want("DELETE", "/store/items", `{"namespace":["users","u1"],"key":"prefs"}`, 204)
	a.want("GET", "/store/items?namespace=users.u1&key=prefs", "", 200, "null")
	a.want("DELETE", "/store/items", `{"namespace":["users","u1"],"key":"prefs"}`, 204)
	a.want("GET", "/info", "", 200, `"store":true`)
	// Secrets in a value are redacted before it is stored.
	a.want("PUT", "/store/items", `{"namespace":["users","u1"],"key":"creds","value":{"api_key":"abc","text":"mine is sk-live-0123456789abcdefghij"}}`, 204)
	if b := a.want("GET", "/store/items?namespace=users.u1&key=creds", "", 200, `"api_key":"[REDACTED]"`); strings.Contains(b, "sk-live") || strings.Contains(b, "abc") {
		t.Fatalf("a secret was stored: %s", b)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestStoreAPITTL: ttl is in minutes; reads refresh it unless
// refresh_ttl is false; an expired item reads as null and is not found.
func TestStoreAPITTL(t *testing.T) {
	a := newStoreAPI(t, nil)
	a.want("PUT", "/store/items", `{"namespace":["tmp"],"key":"k","value":{"v":1},"ttl":1}`, 204)
	a.want("PUT", "/store/items", `{"namespace":["tmp"],"key":"half","value":{"v":2},"ttl":0.5}`, 204)
	a.advance(40 * time.Second)
	a.want("GET", "/store/items?namespace=tmp&key=half", "", 200, "null")
	a.want("GET", "/store/items?namespace=tmp&key=k", "", 200, `"v":1`) // refreshed: expires 60 s from now
	a.advance(40 * time.Second)
	a.want("GET", "/store/items?namespace=tmp&key=k&refresh_ttl=false", "", 200, `"v":1`)
	a.want("POST", "/store/items/search", `{"namespace_prefix":["tmp"],"refresh_ttl":false}`, 200, `"v":1`)
	a.advance(30 * time.Second)
	a.want("GET", "/store/items?namespace=tmp&key=k", "", 200, "null")
	a.want("POST", "/store/items/search", `{"namespace_prefix":["tmp"]}`, 200, `{"items":[]}`)
	a.want("POST", "/store/namespaces", `{}`, 200, `{"namespaces":[]}`)
}

// TestStoreAPIRefuses: bad requests are 422s that say where, and write
// nothing.
func TestStoreAPIRefuses(t *testing.T) {
	a := newStoreAPI(t, nil)
	for _, tc := range []struct{ method, path, body, where string }{
		{"PUT", "/store/items", `{}`, "$.namespace"},
		{"PUT", "/store/items", `{"namespace":["a.b"],"key":"k","value":{}}`, "$.namespace"},
		{"PUT", "/store/items", `{"namespace":["a",""],"key":"k","value":{}}`, "$.namespace"},
		{"PUT", "/store/items", `{"namespace":["langgraph"],"key":"k","value":{}}`, "$.namespace"},
		{"PUT", "/store/items", `{"namespace":["a"],"value":{}}`, "$.key"},
		{"PUT", "/store/items", `{"namespace":["a"],"key":"k"}`, "$.value"},
		{"PUT", "/store/items", `{"namespace":["a"],"key":"k","value":null}`, "$.value"},
		{"PUT", "/store/items", `{"namespace":["a"],"key":"k","value":[1]}`, "$.value"},
		{"PUT", "/store/items", `{"namespace":["a"],"key":"k","value":{},"index":true}`, "$.index"},
		{"PUT", "/store/items", `{"namespace":["a"],"key":"k","value":{},"index":["a["]}`, "$.index[0]"},
		{"PUT", "/store/items", `{"namespace":["a"],"key":"k","value":{},"ttl":0}`, "$.ttl"},
		{"PUT", "/store/items", `{"namespace":["a"],"key":"k","value":{},"ttl":-1}`, "$.ttl"},
		{"PUT", "/store/items", `{"namespace":["a"],"key":"k","value":{},"ttl":"soon"}`, "$.ttl"},
		{"PUT", "/store/items", `{"namespace":["a"],"key":"k","value":{},"ttl":1e300}`, "$.ttl"},
		{"PUT", "/store/items", `{"namespace":["a"],"key":"k","value":{},"extra":1}`, "$.extra"},
		{"PUT", "/store/items", `{"namespace":"a","key":"k","value":{}}`, "$.namespace"},
		{"PUT", "/store/items", `{"namespace":["a"],"key":"k","value":{}`, "$"},
		{"GET", "/store/items?namespace=a", "", "key"},
		{"GET", "/store/items?key=k", "", "namespace"},
		{"GET", "/store/items?namespace=a..b&key=k", "", "namespace"},
		{"GET", "/store/items?namespace=a&key=k&refresh_ttl=maybe", "", "refresh_ttl"},
		{"DELETE", "/store/items", `{"namespace":[],"key":"k"}`, "$.namespace"},
		{"DELETE", "/store/items", `{"namespace":["a"],"key":""}`, "$.key"},
		{"POST", "/store/items/search", `{"namespace_prefix":["a.b"]}`, "$.namespace_prefix"},
		{"POST", "/store/items/search", `{"filter":{"a":{"$in":[1]}}}`, "$.filter.a.$in"},
		{"POST", "/store/items/search", `{"filter":{"$gt":1}}`, "$.filter.$gt"},
		{"POST", "/store/items/search", `{"filter":[1]}`, "$.filter"},
		{"POST", "/store/items/search", `{"limit":-1}`, "$.limit"},
		{"POST", "/store/items/search", `{"limit":5000}`, "$.limit"},
		{"POST", "/store/items/search", `{"offset":-1}`, "$.offset"},
		{"POST", "/store/items/search", `{"query":3}`, "$.query"},
		{"POST", "/store/namespaces", `{"max_depth":0}`, "$.max_depth"},
		{"POST", "/store/namespaces", `{"prefix":["a.b"]}`, "$.prefix"},
		{"POST", "/store/namespaces", `{"suffix":[""]}`, "$.suffix"},
	} {
		code, b := a.do(tc.method, tc.path, tc.body)
		var e struct{ Path, Detail string }
		_ = json.Unmarshal([]byte(b), &e)
		if code != 422 || e.Path != tc.where || e.Detail == "" {
			t.Errorf("%s %s %s: %d %s, want a 422 at %s", tc.method, tc.path, tc.body, code, b, tc.where)
		}
	}
	a.want("POST", "/store/namespaces", `{}`, 200, `{"namespaces":[]}`)
}

// TestStoreAPITenants: a tenant's items are invisible to another tenant's
// keys, and a request without a key is refused.
func TestStoreAPITenants(t *testing.T) {
	var ks store.KeyStore
	a := newStoreAPI(t, func(cfg *server.Config, s store.Store) {
		var err error
		if ks, err = store.KeysOf(s); err != nil {
			t.Fatal(err)
		}
		cfg.Keys = ks
	})
	ctx := context.Background()
	acme, _, err := server.NewKey(ctx, ks, "acme", "a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	globex, _, err := server.NewKey(ctx, ks, "globex", "g", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a.want("PUT", "/store/items", `{"namespace":["m"],"key":"k","value":{"v":1}}`, 401)
	a.key = acme
	a.want("PUT", "/store/items", `{"namespace":["m"],"key":"k","value":{"who":"acme","text":"secret plan"}}`, 204)
	a.key = globex
	a.want("GET", "/store/items?namespace=m&key=k", "", 200, "null")
	a.want("POST", "/store/items/search", `{"namespace_prefix":[],"query":"secret"}`, 200, `{"items":[]}`)
	a.want("POST", "/store/items/search", `{"namespace_prefix":["m"]}`, 200, `{"items":[]}`)
	a.want("POST", "/store/namespaces", `{}`, 200, `{"namespaces":[]}`)
	a.want("DELETE", "/store/items", `{"namespace":["m"],"key":"k"}`, 204)
	a.want("PUT", "/store/items", `{"namespace":["m"],"key":"k","value":{"who":"globex"}}`, 204)
	a.key = acme
	a.want("GET", "/store/items?namespace=m&key=k", "", 200, `"who":"acme"`)
	a.want("POST", "/store/items/search", `{"namespace_prefix":["m"]}`, 200, `"who":"acme"`)
}

// TestStoreAPISemantic: with an item store made with an embedder, a
// query ranks by cosine similarity; an embedder that fails is a 502 and
// writes nothing.
func TestStoreAPISemantic(t *testing.T) {
	emb := &storetest.WordEmbedder{}
	a := newStoreAPI(t, func(cfg *server.Config, s store.Store) {
		is, err := store.ItemsOf(s, store.WithIndex(store.IndexConfig{Embed: emb, Dims: len(storetest.Vocabulary), Fields: []string{"text"}}))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Items = is
	})
	for k, text := range map[string]string{"a": "apple apple banana", "b": "banana cherry", "c": "dog cat"} {
		a.want("PUT", "/store/items", `{"namespace":["kb"],"key":"`+k+`","value":{"text":"`+text+`"}}`, 204)
	}
	b := a.want("POST", "/store/items/search", `{"namespace_prefix":["kb"],"query":"apple"}`, 200)
	var res struct {
		Items []struct {
			Key   string
			Score float64
		}
	}
	if err := json.Unmarshal([]byte(b), &res); err != nil || len(res.Items) != 3 || res.Items[0].Key != "a" || res.Items[0].Score < 0.89 || res.Items[1].Score != 0 {
		t.Fatalf("semantic search: %s", b)
	}
	emb.Fail = true
	a.want("PUT", "/store/items", `{"namespace":["kb"],"key":"d","value":{"text":"car"}}`, 502, "embedding failed")
	emb.Fail = false
	a.want("GET", "/store/items?namespace=kb&key=d", "", 200, "null")
}
