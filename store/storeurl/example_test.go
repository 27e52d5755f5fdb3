package storeurl_test

import (
	"fmt"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/storeurl"
)

func ExampleParse() {
	spec, err := storeurl.Parse("sqlite:.cairn/state.db?durability=strict")
	fmt.Println(spec.Scheme, spec.Path, spec.Durability, err)
	_, err = storeurl.Parse("mysql://x")
	fmt.Println(err)
	// Output:
	// sqlite .cairn/state.db strict <nil>
	// store: invalid argument: store URL "mysql://x": unknown scheme "mysql" (memory, sqlite, postgres)
}

func ExampleOpen() {
	s, err := storeurl.Open("memory:", store.Options{}, "")
	if err != nil {
		panic(err)
	}
	defer s.Close()
	fmt.Println(s.Backend() != nil)
	// Output: true
}
