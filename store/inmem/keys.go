package inmem

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/store"
)

// PutKey implements store.KeyStore.
func (b *Backend) PutKey(_ context.Context, k store.KeyRecord) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	if _, ok := b.keys[k.ID]; ok {
		return fmt.Errorf("%w: key %q exists", store.ErrConflict, k.ID)
	}
	k.Hash = bytes.Clone(k.Hash)
	b.keys[k.ID] = k
	return nil
}

// Key implements store.KeyStore.
func (b *Backend) Key(_ context.Context, id string) (store.KeyRecord, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return store.KeyRecord{}, err
	}
	k, ok := b.keys[id]
	if !ok {
		return k, fmt.Errorf("%w: key %q", store.ErrNotFound, id)
	}
	k.Hash = bytes.Clone(k.Hash)
	return k, nil
}

// Keys implements store.KeyStore.
func (b *Backend) Keys(_ context.Context, tenant string) ([]store.KeyRecord, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return nil, err
	}
	var out []store.KeyRecord
	for _, k := range b.keys {
		if tenant == "" || k.Tenant == tenant {
			k.Hash = bytes.Clone(k.Hash)
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b store.KeyRecord) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// DeleteKey implements store.KeyStore.
func (b *Backend) DeleteKey(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	if _, ok := b.keys[id]; !ok {
		return fmt.Errorf("%w: key %q", store.ErrNotFound, id)
	}
	delete(b.keys, id)
	return nil
}

var _ store.KeyStore = (*Backend)(nil)
