package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// Acquire implements store.LeaseStore: one statement, so two owners
// racing for an expired lease cannot both win.
func (b *Backend) Acquire(ctx context.Context, thread, owner string, ttl time.Duration) (store.Lease, error) {
	if err := b.writable(); err != nil {
		return store.Lease{}, err
	}
	now := time.Now()
	l := store.Lease{Thread: thread, Owner: owner, ExpiresAt: now.Add(ttl)}
	err := b.pool.QueryRow(ctx, `INSERT INTO cairn_leases (thread, owner, token, expires_at) VALUES ($1, $2, 1, $3)
		ON CONFLICT (thread) DO UPDATE SET owner = EXCLUDED.owner, token = cairn_leases.token + 1, expires_at = EXCLUDED.expires_at
		WHERE cairn_leases.expires_at <= $4 OR cairn_leases.owner = EXCLUDED.owner
		RETURNING token`, thread, owner, l.ExpiresAt.UnixNano(), now.UnixNano()).Scan(&l.Token)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, lerr := b.Lease(ctx, thread)
		if lerr != nil {
			return store.Lease{}, lerr
		}
		return store.Lease{}, fmt.Errorf("%w: %w: thread %q, owner %s until %s", store.ErrConflict, store.ErrLeaseHeld, thread, cur.Owner, cur.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	return l, wrap(err, "acquire lease", thread)
}

// Renew implements store.LeaseStore.
func (b *Backend) Renew(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	if err := b.writable(); err != nil {
		return store.Lease{}, err
	}
	l.ExpiresAt = time.Now().Add(ttl)
	tag, err := b.pool.Exec(ctx, `UPDATE cairn_leases SET expires_at = $3 WHERE thread = $1 AND token = $2`, l.Thread, l.Token, l.ExpiresAt.UnixNano())
	if err != nil {
		return store.Lease{}, wrap(err, "renew lease", l.Thread)
	}
	if tag.RowsAffected() == 0 {
		return store.Lease{}, b.fencedError(ctx, l.Thread, l.Token)
	}
	return l, nil
}

// Release implements store.LeaseStore: the token stays, so it is never
// reused.
func (b *Backend) Release(ctx context.Context, l store.Lease) error {
	if err := b.writable(); err != nil {
		return err
	}
	tag, err := b.pool.Exec(ctx, `UPDATE cairn_leases SET expires_at = 0 WHERE thread = $1 AND token = $2`, l.Thread, l.Token)
	if err != nil {
		return wrap(err, "release lease", l.Thread)
	}
	if tag.RowsAffected() == 0 {
		return b.fencedError(ctx, l.Thread, l.Token)
	}
	return nil
}

// Lease implements store.LeaseStore.
func (b *Backend) Lease(ctx context.Context, thread string) (store.Lease, error) {
	l := store.Lease{Thread: thread}
	var exp int64
	err := b.pool.QueryRow(ctx, `SELECT owner, token, expires_at FROM cairn_leases WHERE thread = $1`, thread).Scan(&l.Owner, &l.Token, &exp)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, nil
	}
	if exp > 0 {
		l.ExpiresAt = time.Unix(0, exp)
	}
	return l, wrap(err, "lease", thread)
}

// fencedError is the error of a write whose token is no longer the lease's.
func (b *Backend) fencedError(ctx context.Context, thread string, token int64) error {
	cur, err := b.Lease(ctx, thread)
	if err != nil {
		return err
	}
	return driver.FencedError(thread, token, cur.Token)
}

var _ store.LeaseStore = (*Backend)(nil)
