package storeurl_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

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

// A read command opens the store read-only: a mistyped path is an error,
// not a new empty store.
func ExampleOpenReadOnly() {
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	_, err = storeurl.OpenReadOnly("sqlite:"+filepath.Join(dir, "typo", "state.db"), store.Options{})
	fmt.Println(errors.Is(err, store.ErrNotFound))
	_, statErr := os.Stat(filepath.Join(dir, "typo"))
	fmt.Println(os.IsNotExist(statErr))
	// Output:
	// true
	// true
}
