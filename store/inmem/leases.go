package inmem

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// Acquire implements store.LeaseStore.
func (b *Backend) Acquire(_ context.Context, thread, owner string, ttl time.Duration) (store.Lease, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return store.Lease{}, err
	}
	now := time.Now()
	l := b.leases[thread]
	if l.Token > 0 && l.Owner != owner && now.Before(l.ExpiresAt) {
		return store.Lease{}, fmt.Errorf("%w: %w: thread %q, owner %s until %s", store.ErrConflict, store.ErrLeaseHeld, thread, l.Owner, l.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	l = store.Lease{Thread: thread, Owner: owner, Token: l.Token + 1, ExpiresAt: now.Add(ttl)}
	b.leases[thread] = l
	return l, nil
}

// Renew implements store.LeaseStore.
func (b *Backend) Renew(_ context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return store.Lease{}, err
	}
	cur := b.leases[l.Thread]
	if cur.Token != l.Token {
		return store.Lease{}, driver.FencedError(l.Thread, l.Token, cur.Token)
	}
	cur.ExpiresAt = time.Now().Add(ttl)
	b.leases[l.Thread] = cur
	return cur, nil
}

// Release implements store.LeaseStore.
func (b *Backend) Release(_ context.Context, l store.Lease) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	cur := b.leases[l.Thread]
	if cur.Token != l.Token {
		return driver.FencedError(l.Thread, l.Token, cur.Token)
	}
	cur.ExpiresAt = time.Time{}
	b.leases[l.Thread] = cur
	return nil
}

// Lease implements store.LeaseStore.
func (b *Backend) Lease(_ context.Context, thread string) (store.Lease, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return store.Lease{}, err
	}
	l := b.leases[thread]
	l.Thread = thread
	return l, nil
}

// fenced checks a row's fencing token (b.mu held).
func (b *Backend) fenced(r driver.Row) error {
	if r.Fence == 0 {
		return nil
	}
	if cur := b.leases[r.Thread].Token; cur != r.Fence {
		return driver.FencedError(r.Thread, r.Fence, cur)
	}
	return nil
}

var _ store.LeaseStore = (*Backend)(nil)
