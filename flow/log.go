package flow

import (
	"context"
	"log/slog"
	"time"
)

// discard is the logger of a runner given none.
var discard = slog.New(slog.DiscardHandler)

// SlowCommit is how long a commit may take before the runner warns.
const SlowCommit = time.Second

// log records a run's doings; attributes name the thread, namespace and
// run, never a value.
func (r *Runner) log(ctx context.Context, level slog.Level, msg string, run *run, attrs ...slog.Attr) {
	if !r.opts.Logger.Enabled(ctx, level) {
		return
	}
	attrs = append(attrs, slog.String("thread", run.thread), slog.String("run_id", run.id))
	if r.opts.Namespace != "" {
		attrs = append(attrs, slog.String("ns", r.opts.Namespace))
	}
	r.opts.Logger.LogAttrs(ctx, level, msg, attrs...)
}
