package runs

import (
	"context"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// startAt is when a run may start: after_seconds after it was created.
func startAt(rec store.RunRecord, k Kwargs) time.Time {
	return time.Unix(0, rec.CreatedAt).Add(time.Duration(k.AfterSeconds * float64(time.Second)))
}

// waitStart waits, its run pending, until a delayed run may start
// (after_seconds), or its context ends (cancelled: it ends interrupted
// without starting).
func (s *Service) waitStart(ctx context.Context, rec store.RunRecord, k Kwargs) {
	if k.AfterSeconds <= 0 {
		return
	}
	wait := startAt(rec, k).Sub(s.cfg.Now())
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
