package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// currentLease reads a thread's lease on c (zero token: none).
func currentLease(ctx context.Context, c interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, thread string) (store.Lease, error) {
	l := store.Lease{Thread: thread}
	var exp int64
	err := c.QueryRowContext(ctx, `SELECT owner, token, expires_at FROM leases WHERE thread = ?`, thread).Scan(&l.Owner, &l.Token, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return l, nil
	}
	if exp > 0 {
		l.ExpiresAt = time.Unix(0, exp)
	}
	return l, err
}

// Acquire implements store.LeaseStore.
func (b *Backend) Acquire(ctx context.Context, thread, owner string, ttl time.Duration) (store.Lease, error) {
	var out store.Lease
	err := b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		l, err := currentLease(ctx, c, thread)
		if err != nil {
			return err
		}
		now := time.Now()
		if l.Token > 0 && l.Owner != owner && now.Before(l.ExpiresAt) {
			return fmt.Errorf("%w: %w: thread %q, owner %s until %s", store.ErrConflict, store.ErrLeaseHeld, thread, l.Owner, l.ExpiresAt.UTC().Format(time.RFC3339Nano))
		}
		out = store.Lease{Thread: thread, Owner: owner, Token: l.Token + 1, ExpiresAt: now.Add(ttl)}
		_, err = c.ExecContext(ctx, `INSERT INTO leases (thread, owner, token, expires_at) VALUES (?,?,?,?)
			ON CONFLICT (thread) DO UPDATE SET owner = excluded.owner, token = excluded.token, expires_at = excluded.expires_at`,
			thread, owner, out.Token, out.ExpiresAt.UnixNano())
		return err
	})
	return out, err
}

// Renew implements store.LeaseStore.
func (b *Backend) Renew(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	var out store.Lease
	err := b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		cur, err := currentLease(ctx, c, l.Thread)
		if err != nil {
			return err
		}
		if cur.Token != l.Token {
			return driver.FencedError(l.Thread, l.Token, cur.Token)
		}
		cur.ExpiresAt = time.Now().Add(ttl)
		out = cur
		_, err = c.ExecContext(ctx, `UPDATE leases SET expires_at = ? WHERE thread = ? AND token = ?`, cur.ExpiresAt.UnixNano(), l.Thread, l.Token)
		return err
	})
	return out, err
}

// Release implements store.LeaseStore.
func (b *Backend) Release(ctx context.Context, l store.Lease) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		res, err := c.ExecContext(ctx, `UPDATE leases SET expires_at = 0 WHERE thread = ? AND token = ?`, l.Thread, l.Token)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			cur, err := currentLease(ctx, c, l.Thread)
			if err != nil {
				return err
			}
			return driver.FencedError(l.Thread, l.Token, cur.Token)
		}
		return nil
	})
}

// Lease implements store.LeaseStore.
func (b *Backend) Lease(ctx context.Context, thread string) (store.Lease, error) {
	l, err := currentLease(ctx, b.read, thread)
	return l, b.readErr(err, thread, "", 0, "lease")
}

// checkFence refuses a fenced row whose lease has another token (inside
// the write transaction, so no take-over can slip in before the commit).
func checkFence(ctx context.Context, c *sql.Conn, r driver.Row) error {
	if r.Fence == 0 {
		return nil
	}
	cur, err := currentLease(ctx, c, r.Thread)
	if err != nil {
		return err
	}
	if cur.Token != r.Fence {
		return driver.FencedError(r.Thread, r.Fence, cur.Token)
	}
	return nil
}

var _ store.LeaseStore = (*Backend)(nil)
