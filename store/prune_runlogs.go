package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/store/driver"
)

// check refuses a prune request that cannot be carried out.
func (r PruneRequest) check() error {
	if r.KeepLast < 0 || r.OlderThan < 0 || r.RunLogsOlderThan < 0 {
		return fmt.Errorf("%w: keep-last %d, older-than %s, run logs older than %s: must not be negative", ErrInvalidArgument, r.KeepLast, r.OlderThan, r.RunLogsOlderThan)
	}
	if r.RunLogsOlderThan > 0 && r.Thread != "" {
		return fmt.Errorf("%w: run logs are trimmed across the store, not for one thread (thread %q)", ErrInvalidArgument, r.Thread)
	}
	return nil
}

// trimRunLogs deletes the event logs of runs that ended before t, on a
// backend that keeps runs.
func (e *Engine) trimRunLogs(ctx context.Context, t time.Time) (int64, error) {
	rl, ok := e.b.(RunLog)
	if !ok {
		return 0, nil
	}
	return rl.TrimEvents(ctx, t.UnixNano())
}

// dropRunLogs deletes the event logs of a thread's ended runs that refer
// to a checkpoint a prune deleted (gone: the deleted seq ranges of each
// namespace): their events could no longer be rebuilt. A run still going
// keeps its log. It returns how many logs went.
func (e *Engine) dropRunLogs(ctx context.Context, thread string, gone map[string][]driver.SeqRange) (int64, error) {
	if len(gone) == 0 {
		return 0, nil
	}
	if _, ok := e.b.(RunLog); !ok {
		return 0, nil
	}
	rl, err := RunLogOf(e)
	if err != nil {
		return 0, err
	}
	runs, err := rl.Runs(ctx, RunQuery{Thread: thread})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, run := range runs {
		if !RunEnded(run.Status) {
			continue
		}
		hit, err := refersTo(ctx, rl, run.ID, gone)
		if err != nil || !hit {
			if err != nil {
				return n, err
			}
			continue
		}
		if err := rl.DeleteEvents(ctx, run.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return n, err
		}
		n++
	}
	return n, nil
}

// refersTo reports whether one of a run's events refers to a checkpoint
// in gone.
func refersTo(ctx context.Context, rl RunLog, run string, gone map[string][]driver.SeqRange) (bool, error) {
	evs, err := rl.Events(ctx, run, 0, 0)
	if err != nil {
		return false, err
	}
	for _, ev := range evs {
		if ev.Ref == nil {
			continue
		}
		for _, r := range gone[ev.Ref.Namespace] {
			if ev.Ref.Seq >= r.From && ev.Ref.Seq <= r.To {
				return true, nil
			}
		}
	}
	return false, nil
}
