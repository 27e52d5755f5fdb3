package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// pruneFlags are cairn prune's flags.
type pruneFlags struct {
	thread     string
	vacuum     bool
	keepLast   int
	olderThan  time.Duration
	expired    bool
	runLogs    time.Duration
	deprecated int // --keep, the old name of --keep-last
}

func (f *pruneFlags) request() (store.PruneRequest, error) {
	if f.deprecated != 0 {
		if f.keepLast != 0 && f.keepLast != f.deprecated {
			return store.PruneRequest{}, usagef("--keep %d and --keep-last %d disagree (--keep is the old name of --keep-last)", f.deprecated, f.keepLast)
		}
		f.keepLast = f.deprecated
	}
	switch {
	case f.keepLast < 0:
		return store.PruneRequest{}, usagef("--keep-last %d: must be at least 1", f.keepLast)
	case f.olderThan < 0 || f.runLogs < 0:
		return store.PruneRequest{}, usagef("--older-than %s, --run-logs-older-than %s: must be positive", f.olderThan, f.runLogs)
	case f.keepLast == 0 && f.olderThan == 0 && !f.expired && f.runLogs == 0:
		return store.PruneRequest{}, usagef("say what to prune: --keep-last N, --older-than DURATION, --expired or --run-logs-older-than DURATION")
	case f.thread != "" && (f.olderThan != 0 || f.expired || f.runLogs != 0):
		return store.PruneRequest{}, usagef("--thread goes with --keep-last only (to delete one thread: cairn delete THREAD)")
	}
	return store.PruneRequest{Thread: f.thread, KeepLast: f.keepLast, OlderThan: f.olderThan, Expired: f.expired, RunLogsOlderThan: f.runLogs}, nil
}

func (a *app) pruneCmd() *cobra.Command {
	var f pruneFlags
	cmd := &cobra.Command{
		Use:   "prune (--keep-last N [--thread ID] | --older-than DURATION | --expired | --run-logs-older-than DURATION) [--vacuum]",
		Short: "Delete old history: all but the newest N checkpoints of each branch, or idle threads",
		Long: "--keep-last N keeps the newest N checkpoints of every branch of every thread (or of --thread) and deletes the older ones: " +
			"the oldest kept checkpoint of a branch gets a snapshot of its own state, so every kept one still rebuilds; a paused or failed " +
			"checkpoint also keeps the one its step resumes from, with the pending writes a resume needs. --vacuum then rebuilds the database " +
			"so that no byte of what went stays in its free space. --older-than deletes whole threads idle for that long; " +
			"--expired those past their own time to live (thread metadata " + store.ThreadTTLKey + "). A thread with a run in progress " +
			"or a pause waiting for an answer is never deleted. --run-logs-older-than deletes the event logs of runs that ended longer ago " +
			"(their records stay); a prune that deletes checkpoints also deletes the logs of ended runs whose events referred to them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := f.request()
			if err != nil {
				return err
			}
			s, err := a.openExisting()
			if err != nil {
				return err
			}
			defer s.Close()
			vac, canVacuum := s.Backend().(driver.Vacuumer)
			if f.vacuum && !canVacuum {
				return usagef("--vacuum: the store %s keeps nothing to vacuum", a.shownStore())
			}
			res, err := s.Prune(cmd.Context(), req)
			if err != nil {
				return argError(err)
			}
			if f.vacuum {
				if err := vac.Vacuum(cmd.Context()); err != nil {
					return err
				}
			}
			return a.printPruned(res, f.vacuum)
		},
	}
	cmd.Flags().StringVar(&f.thread, "thread", "", "prune only this thread")
	cmd.Flags().BoolVar(&f.vacuum, "vacuum", false, "then rebuild the database so that no byte of what went stays in it (SQLite: VACUUM and an emptied WAL; PostgreSQL: VACUUM FULL, which locks the tables while it runs)")
	cmd.Flags().IntVar(&f.keepLast, "keep-last", 0, "checkpoints to keep on each branch of each thread namespace (≥ 1)")
	cmd.Flags().IntVar(&f.deprecated, "keep", 0, "the old name of --keep-last")
	cmd.Flags().DurationVar(&f.olderThan, "older-than", 0, "delete threads with no activity for this long (e.g. 720h)")
	cmd.Flags().BoolVar(&f.expired, "expired", false, "delete threads past their own time to live (metadata "+store.ThreadTTLKey+")")
	cmd.Flags().DurationVar(&f.runLogs, "run-logs-older-than", 0, "delete the event logs of runs that ended this long ago (e.g. 24h); their records stay")
	return cmd
}

// printPruned reports what a prune did, and how the database gets the
// space back (vacuumed: it did).
func (a *app) printPruned(res store.PruneResult, vacuumed bool) error {
	if a.json {
		return a.printJSON(map[string]any{"threads": res.Threads, "checkpoints": res.Checkpoints, "bytes": res.Bytes, "run_logs": res.RunLogs,
			"rebased": res.Rebased, "rebased_bytes": res.RebasedBytes, "vacuumed": vacuumed,
			"deleted_threads": orEmpty(res.Deleted), "busy_threads": orEmpty(res.Busy)})
	}
	fmt.Fprintf(a.stdout, "pruned %d checkpoints (%d bytes) from %d threads\n", res.Checkpoints, res.Bytes, res.Threads)
	if res.Rebased > 0 {
		fmt.Fprintf(a.stdout, "gave the oldest kept checkpoint of %d branches a snapshot of its own state (%d bytes)\n", res.Rebased, res.RebasedBytes)
	}
	if res.RunLogs > 0 {
		fmt.Fprintf(a.stdout, "deleted the event logs of %d runs\n", res.RunLogs)
	}
	if len(res.Deleted) > 0 {
		fmt.Fprintf(a.stdout, "deleted %d threads: %s\n", len(res.Deleted), strings.Join(res.Deleted, " "))
	}
	if len(res.Busy) > 0 {
		fmt.Fprintf(a.stdout, "left as they were (busy): %s\n", strings.Join(res.Busy, " "))
	}
	switch {
	case vacuumed:
		fmt.Fprintln(a.stdout, "vacuumed: the database was rebuilt without the space freed (backups made before still hold what went)")
	case res.Checkpoints > 0 || len(res.Deleted) > 0:
		if strings.HasPrefix(a.storeURL, "postgres") {
			fmt.Fprintln(a.stderr, "PostgreSQL's autovacuum makes the space reusable; the deleted rows stay in the table files until VACUUM FULL (cairn prune --vacuum, which locks the tables while it runs).")
		} else if s := store.Scheme(a.storeURL); s != "inmem" && s != "memory" {
			fmt.Fprintln(a.stderr, "SQLite reuses the freed pages for new checkpoints; what went stays in them until the file is vacuumed (cairn prune --vacuum, which holds writers back while it runs).")
		}
	}
	return nil
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (a *app) copyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "copy THREAD NEW",
		Short: "Copy a thread, its whole history and pending writes, into a new thread",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := store.ValidateThreadID(args[1]); err != nil {
				return usagef("NEW %q: %v", args[1], err)
			}
			s, err := a.openExisting()
			if err != nil {
				return err
			}
			defer s.Close()
			th, err := s.CopyThread(cmd.Context(), args[0], args[1])
			if err != nil {
				return argError(err)
			}
			if a.json {
				return a.printJSON(map[string]any{"thread": th.ID, "head": th.Head, "copied_from": args[0]})
			}
			fmt.Fprintf(a.stdout, "copied %s to %s (head %d)\n", args[0], th.ID, th.Head)
			return nil
		},
	}
}

func (a *app) deleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete THREAD",
		Short: "Delete a thread with its history, pending writes and runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openExisting()
			if err != nil {
				return err
			}
			defer s.Close()
			if err := s.DeleteThread(cmd.Context(), args[0]); err != nil {
				return argError(err)
			}
			fmt.Fprintf(a.stdout, "deleted %s\n", args[0])
			return nil
		},
	}
}

// retentionFlags are the background sweep's flags of cairn serve and
// cairn worker.
type retentionFlags struct {
	every     time.Duration
	keepLast  int
	olderThan time.Duration
	runLogs   time.Duration
}

func (f *retentionFlags) bind(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&f.every, "retention-every", 10*time.Minute, "how often to sweep the store: threads past their own time to live ("+store.ThreadTTLKey+"), and what --retention-keep-last and --retention-older-than ask (0: never; one process sweeps at a time)")
	cmd.Flags().IntVar(&f.keepLast, "retention-keep-last", 0, "each sweep keeps the newest N checkpoints of each branch of each thread (0: all)")
	cmd.Flags().DurationVar(&f.olderThan, "retention-older-than", 0, "each sweep deletes threads idle for this long (0: none)")
	cmd.Flags().DurationVar(&f.runLogs, "retention-run-logs", store.DefaultRunLogRetention, "each sweep deletes the event logs of runs that ended this long ago; their records stay (0: keep them until the thread goes)")
}

func (f *retentionFlags) check() error {
	if f.every < 0 || f.keepLast < 0 || f.olderThan < 0 || f.runLogs < 0 {
		return usagef("--retention-every %s, --retention-keep-last %d, --retention-older-than %s, --retention-run-logs %s: none may be negative", f.every, f.keepLast, f.olderThan, f.runLogs)
	}
	if f.every == 0 && (f.keepLast > 0 || f.olderThan > 0) {
		return usagef("--retention-keep-last and --retention-older-than need sweeps: --retention-every must be positive")
	}
	return nil
}

// sweep runs the store's retention sweeper until ctx ends, if asked.
func (a *app) sweep(ctx context.Context, s store.Store, f retentionFlags, owner string) {
	if f.every == 0 {
		return
	}
	sw := store.Sweeper{Store: s, Every: f.every, Owner: owner, Logger: a.logger,
		Request: store.PruneRequest{KeepLast: f.keepLast, OlderThan: f.olderThan, Expired: true, RunLogsOlderThan: f.runLogs}}
	go func() { _ = sw.Run(ctx) }()
}

// prunedBefore returns the checkpoints of a history listing that begin
// what a prune left of their branch (store.PrunedBoundary): their parent
// is neither listed nor stored.
func prunedBefore(ctx context.Context, s store.Store, cps []store.Checkpoint) (map[int64]bool, error) {
	listed := make(map[int64]bool, len(cps))
	for _, cp := range cps {
		listed[cp.Seq] = true
	}
	cut := map[int64]bool{}
	for _, cp := range cps {
		if listed[cp.Parent] || !store.PrunedBoundary(cp) {
			continue
		}
		stored := false
		for p, err := range s.History(ctx, store.HistoryRequest{Thread: cp.Thread, Namespace: cp.Namespace, Before: cp.Parent + 1, Limit: 1}) {
			if err != nil {
				return nil, err
			}
			stored = p.Seq == cp.Parent
		}
		cut[cp.Seq] = !stored
	}
	return cut, nil
}

// describeIn is describe with the mark of a checkpoint whose parent was
// pruned (cut).
func describeIn(cp store.Checkpoint, cut map[int64]bool) string {
	d := describe(cp)
	if !cut[cp.Seq] {
		return d
	}
	note := fmt.Sprintf("parent %d pruned", cp.Parent)
	if d == "-" {
		return note
	}
	return note + "; " + d
}
