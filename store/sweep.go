package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// sweeperLease is the lease that lets one process at a time sweep a
// store.
const sweeperLease = "cairn.retention.sweeper"

// Sweeper prunes a store every so often (cairn serve and cairn worker run
// one): at most one sweep per period across every process sharing the
// store, through a lease when the store keeps leases.
type Sweeper struct {
	Store Store
	// Request is the prune each sweep makes (its Now is the sweep's time).
	Request PruneRequest
	// Every is the period (positive).
	Every time.Duration
	// Owner names this process in the lease.
	Owner  string
	Logger *slog.Logger
}

// Run sweeps every period until ctx ends.
func (sw Sweeper) Run(ctx context.Context) error {
	if sw.Every <= 0 || sw.Owner == "" {
		return fmt.Errorf("%w: a sweeper needs a positive period and an owner", ErrInvalidArgument)
	}
	if sw.Logger == nil {
		sw.Logger = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(sw.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		res, swept, err := sw.Once(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			sw.Logger.Warn("retention sweep failed", "err", err)
		case swept && (res.Checkpoints > 0 || len(res.Deleted) > 0):
			sw.Logger.Info("retention sweep", "checkpoints", res.Checkpoints, "bytes", res.Bytes, "threads", res.Threads, "deleted_threads", len(res.Deleted), "busy_threads", len(res.Busy))
		}
	}
}

// Once sweeps now unless another process swept within the period
// (swept false).
func (sw Sweeper) Once(ctx context.Context) (res PruneResult, swept bool, err error) {
	if ls, lerr := LeasesOf(sw.Store); lerr == nil {
		// The lease is left to run out: nobody sweeps again this period.
		if _, err := ls.Acquire(ctx, sweeperLease, sw.Owner, sw.Every); errors.Is(err, ErrLeaseHeld) {
			return res, false, nil
		} else if err != nil {
			return res, false, err
		}
	}
	req := sw.Request
	req.Now = time.Time{}
	res, err = sw.Store.Prune(ctx, req)
	return res, true, err
}
