package driver_test

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/cairn-dev/cairn/store/inmem"
)

// exampleDriver opens "example-mem:" URLs: a new in-memory backend each
// time.
type exampleDriver struct{}

func (exampleDriver) Check(url string) error {
	if url != "example-mem:" {
		return fmt.Errorf("%w: store URL %q takes no path", driver.ErrInvalidArgument, url)
	}
	return nil
}

func (exampleDriver) Open(context.Context, string, driver.OpenOptions) (driver.Backend, error) {
	return inmem.New(), nil
}

// A backend registers its driver under a URL scheme (in its init
// function); store.Open then opens its stores by URL and puts the engine
// on the backend the driver opens. An error the backend returns matches
// store's sentinels: they are the driver's very values.
func Example() {
	driver.Register("example-mem", exampleDriver{})
	fmt.Println(slices.Contains(store.Schemes(), "example-mem"))
	ctx := context.Background()
	s, err := store.Open(ctx, "example-mem:", store.OpenOptions{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	_, err = s.Thread(ctx, "nobody")
	fmt.Println(errors.Is(err, store.ErrNotFound), errors.Is(err, driver.ErrNotFound))
	// Output:
	// true
	// true true
}
