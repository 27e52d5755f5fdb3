package store

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/store/driver"
)

// Lease says which process owns a thread's runs: the owner that acquired
// it until ExpiresAt, with a fencing token that grows at every take-over
// and is never reused. Appends made under a lease (WithFence) carry the
// token; once another owner has taken the lease over, they fail with
// ErrFenced and write nothing — on top of the one-writer-per-head rule.
type Lease struct {
	Thread    string
	Owner     string
	Token     int64
	ExpiresAt time.Time
}

// LeaseStore keeps leases (workers running a store's runs use them).
type LeaseStore interface {
	// Acquire takes a thread's lease for owner until now+ttl: a lease
	// that is free, expired, or already owner's is taken with a new token
	// (one more than the last); a live lease of another owner is
	// ErrLeaseHeld.
	Acquire(ctx context.Context, thread, owner string, ttl time.Duration) (Lease, error)
	// Renew extends a lease held with l.Token until now+ttl; ErrFenced
	// when it was taken over.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// Release frees a lease held with l.Token (its token stays, so it is
	// never reused); ErrFenced when it was taken over.
	Release(ctx context.Context, l Lease) error
	// Lease returns a thread's lease (a zero Token: none yet).
	Lease(ctx context.Context, thread string) (Lease, error)
}

var (
	// ErrFenced: an append or a renewal carried a fencing token whose
	// lease another owner has taken over; nothing was written. Errors that
	// wrap it wrap ErrConflict too.
	ErrFenced = driver.ErrFenced
	// ErrLeaseHeld: another owner holds a live lease on the thread. Errors
	// that wrap it wrap ErrConflict too.
	ErrLeaseHeld = driver.ErrLeaseHeld
)

type fenceKey struct{}

type fence struct {
	thread string
	token  int64
}

// WithFence makes the appends to thread made with the returned context
// carry the lease token: a store refuses them with ErrFenced once the
// lease has another token.
func WithFence(ctx context.Context, thread string, token int64) context.Context {
	return context.WithValue(ctx, fenceKey{}, fence{thread, token})
}

// FenceOf returns the fencing token ctx carries for thread (0: none).
func FenceOf(ctx context.Context, thread string) int64 {
	if f, ok := ctx.Value(fenceKey{}).(fence); ok && f.thread == thread {
		return f.token
	}
	return 0
}

// LeasesOf returns the lease store of a store whose backend keeps leases
// (every built-in backend does); ErrInvalidArgument otherwise.
func LeasesOf(s Store) (LeaseStore, error) {
	if e, ok := s.(*Engine); ok {
		if ls, ok := e.b.(LeaseStore); ok {
			return checkedLeases{ls: ls, e: e}, nil
		}
	}
	if ls, ok := s.(LeaseStore); ok {
		return ls, nil
	}
	return nil, fmt.Errorf("%w: this store keeps no leases", ErrInvalidArgument)
}

// checkedLeases refuses calls on a closed store and bad arguments.
type checkedLeases struct {
	ls LeaseStore
	e  *Engine
}

func (c checkedLeases) check(thread string) error {
	if c.e.closed.Load() {
		return ErrClosed
	}
	return ValidateThreadID(thread)
}

func (c checkedLeases) Acquire(ctx context.Context, thread, owner string, ttl time.Duration) (Lease, error) {
	if err := c.check(thread); err != nil {
		return Lease{}, err
	}
	if owner == "" || ttl <= 0 {
		return Lease{}, fmt.Errorf("%w: a lease needs an owner and a positive time to live", ErrInvalidArgument)
	}
	return c.ls.Acquire(ctx, thread, owner, ttl)
}

func (c checkedLeases) Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	if err := c.check(l.Thread); err != nil {
		return Lease{}, err
	}
	if ttl <= 0 || l.Token <= 0 {
		return Lease{}, fmt.Errorf("%w: renewing needs the lease's token and a positive time to live", ErrInvalidArgument)
	}
	return c.ls.Renew(ctx, l, ttl)
}

func (c checkedLeases) Release(ctx context.Context, l Lease) error {
	if err := c.check(l.Thread); err != nil {
		return err
	}
	return c.ls.Release(ctx, l)
}

func (c checkedLeases) Lease(ctx context.Context, thread string) (Lease, error) {
	if err := c.check(thread); err != nil {
		return Lease{}, err
	}
	return c.ls.Lease(ctx, thread)
}
