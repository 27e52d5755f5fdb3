package inmem

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// The scheme is inmem; memory, its earlier name, still opens it.
func init() {
	driver.Register("inmem", urlDriver{})
	driver.Register("memory", urlDriver{})
}

// urlDriver opens "inmem:" URLs (store.Open; "memory:" too): a new, empty
// in-process store each time.
type urlDriver struct{}

func (urlDriver) Check(raw string) error {
	if raw != "inmem:" && raw != "memory:" {
		return fmt.Errorf("%w: store URL %q: inmem takes no path or options", store.ErrInvalidArgument, raw)
	}
	return nil
}

func (urlDriver) Open(context.Context, string, driver.OpenOptions) (driver.Backend, error) {
	return New(), nil
}
