package memory

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/store"
)

func init() { store.Register("memory", driver{}) }

// driver opens "memory:" URLs (store.Open): a new, empty in-process store
// each time.
type driver struct{}

func (driver) Check(raw string) error {
	if raw != "memory:" {
		return fmt.Errorf("%w: store URL %q: memory takes no path or options", store.ErrInvalidArgument, raw)
	}
	return nil
}

func (driver) Open(_ context.Context, _ string, o store.OpenOptions) (*store.Engine, error) {
	return Open(o.Store), nil
}
