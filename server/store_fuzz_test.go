package server

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// FuzzStoreRequests feeds any bytes to the decoders of the /store routes'
// bodies: they never panic; what they refuse is a 422 that says where,
// and what they accept the item store accepts too.
func FuzzStoreRequests(f *testing.F) {
	for _, seed := range []string{
		`{"namespace":["users","u1"],"key":"k","value":{"a":1,"b":[true,null]},"index":["a","b[*]"],"ttl":1.5}`,
		`{"namespace":["a"],"key":"k","value":{},"index":false}`,
		`{"namespace_prefix":["a"],"filter":{"n":{"$gt":1,"$lte":"z"},"o":{"p":[1]}},"limit":5,"offset":2,"query":"tea","refresh_ttl":false}`,
		`{"prefix":["a","*"],"suffix":["b"],"max_depth":2,"limit":10,"offset":0}`,
		`{"namespace":["a.b"],"key":""}`, `{"filter":{"$in":1}}`, `{"ttl":-3}`, `[]`, `null`, ``, `{"value":`,
	} {
		f.Add([]byte(seed))
	}
	is, err := store.ItemsOf(inmem.Open(store.Options{}))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(op store.ItemOp, err error) {
			if err != nil {
				ae, ok := errors.AsType[*apiError](err)
				if !ok || ae.Status != 422 || ae.Path == "" || ae.Msg == "" {
					t.Fatalf("%q: %v (%T)", body, err, err)
				}
				return
			}
			if _, err := is.Batch(context.Background(), []store.ItemOp{op}); errors.Is(err, store.ErrInvalidArgument) || errors.Is(err, store.ErrInvalidID) {
				t.Fatalf("%q: decoded as %+v, which the store refuses: %v", body, op, err)
			}
		}
		put, err := decodePutItem(body, "t")
		check(put, err)
		del, err := decodeDeleteItem(body, "t")
		check(del, err)
		search, err := decodeSearchItems(body, "t")
		check(search, err)
		list, err := decodeListNamespaces(body, "t")
		check(list, err)
	})
}
