package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/store"
)

func init() {
	store.Register("postgres", driver{})
	store.Register("postgresql", driver{})
}

// driver opens "postgres://user@host:port/db[?search_path=schema]" URLs
// (store.Open); the URL is handed to pgx as it is.
type driver struct{}

func (driver) Check(raw string) error {
	_, rest, _ := strings.Cut(raw, ":")
	if !strings.HasPrefix(rest, "//") {
		return fmt.Errorf("%w: store URL %q: want postgres://user@host:port/database", store.ErrInvalidArgument, raw)
	}
	return nil
}

func (driver) Open(ctx context.Context, raw string, o store.OpenOptions) (*store.Engine, error) {
	return OpenStore(ctx, raw, Options{ReadOnly: o.ReadOnly}, o.Store)
}
