package store

import (
	"context"
	"fmt"
)

// KeyRecord is an API key as the store keeps it: never the key itself,
// only the SHA-256 of its secret part.
type KeyRecord struct {
	// ID is the key's public part, by which it is found and revoked.
	ID     string
	Tenant string
	Name   string
	// Hash is the SHA-256 of the key's secret part.
	Hash      []byte
	CreatedAt int64 // Unix nanoseconds
}

// KeyStore keeps API keys (package server authenticates with them).
type KeyStore interface {
	// PutKey adds a key; ErrConflict if its ID is taken.
	PutKey(ctx context.Context, k KeyRecord) error
	// Key returns a key by ID; ErrNotFound.
	Key(ctx context.Context, id string) (KeyRecord, error)
	// Keys lists the keys of a tenant (every tenant's for ""), by ID.
	Keys(ctx context.Context, tenant string) ([]KeyRecord, error)
	// DeleteKey revokes a key; ErrNotFound.
	DeleteKey(ctx context.Context, id string) error
}

// KeysOf returns the key store of a store whose backend keeps one (every
// built-in backend does); ErrInvalidArgument otherwise.
func KeysOf(s Store) (KeyStore, error) {
	if e, ok := s.(*Engine); ok {
		if ks, ok := e.b.(KeyStore); ok {
			return checkedKeys{ks: ks, e: e}, nil
		}
	}
	if ks, ok := s.(KeyStore); ok {
		return ks, nil
	}
	return nil, fmt.Errorf("%w: this store keeps no API keys", ErrInvalidArgument)
}

// checkedKeys refuses calls on a closed store and bad ids.
type checkedKeys struct {
	ks KeyStore
	e  *Engine
}

func (c checkedKeys) check(id string) error {
	if c.e.closed.Load() {
		return ErrClosed
	}
	if err := ValidateID(id); err != nil {
		return fmt.Errorf("key id: %w", err)
	}
	return nil
}

func (c checkedKeys) PutKey(ctx context.Context, k KeyRecord) error {
	if err := c.check(k.ID); err != nil {
		return err
	}
	if len(k.Hash) == 0 {
		return fmt.Errorf("%w: key %q has no hash", ErrInvalidArgument, k.ID)
	}
	return c.ks.PutKey(ctx, k)
}

func (c checkedKeys) Key(ctx context.Context, id string) (KeyRecord, error) {
	if err := c.check(id); err != nil {
		return KeyRecord{}, err
	}
	return c.ks.Key(ctx, id)
}

func (c checkedKeys) Keys(ctx context.Context, tenant string) ([]KeyRecord, error) {
	if c.e.closed.Load() {
		return nil, ErrClosed
	}
	return c.ks.Keys(ctx, tenant)
}

func (c checkedKeys) DeleteKey(ctx context.Context, id string) error {
	if err := c.check(id); err != nil {
		return err
	}
	return c.ks.DeleteKey(ctx, id)
}
