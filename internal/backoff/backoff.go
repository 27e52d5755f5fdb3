package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is exponential backoff with full jitter: before retry n (1-based)
// it waits a random duration in (0, min(Initial·2ⁿ⁻¹, Max)].
type Policy struct {
	Initial time.Duration // first backoff; must be > 0
	Max     time.Duration // cap; must be ≥ Initial
}

// Delay returns the wait before retry n (n ≥ 1), at least floor (a
// server's Retry-After; 0 for none).
func (p Policy) Delay(n int, floor time.Duration) time.Duration {
	ceil := p.Initial
	for i := 1; i < n && ceil < p.Max; i++ {
		ceil *= 2
	}
	ceil = min(ceil, p.Max)
	d := time.Duration(rand.Int64N(int64(ceil))) + 1
	return max(d, floor)
}

// Sleep waits d, or returns ctx's error if it ends first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
