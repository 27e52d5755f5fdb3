package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/store"
)

// runStatuses are the statuses a run of cairn serve has.
var runStatuses = []string{"pending", "running", "success", "error", "interrupted"}

// runView is a run as cairn runs prints it.
type runView struct {
	RunID       string `json:"run_id"`
	Thread      string `json:"thread_id"`
	Tenant      string `json:"tenant,omitempty"`
	Status      string `json:"status"`
	AssistantID string `json:"assistant_id"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
	Attempt     int    `json:"attempt"`
	StopReason  string `json:"stop_reason,omitempty"`
	Error       string `json:"error,omitempty"`
	Events      *int   `json:"events,omitempty"`
}

func viewOfRun(r store.RunRecord) runView {
	var d struct {
		AssistantID string `json:"assistant_id"`
		Attempt     int    `json:"attempt"`
		StopReason  string `json:"stop_reason"`
		Error       string `json:"error"`
	}
	_ = json.Unmarshal(r.Data, &d) // a damaged record still lists its columns
	return runView{RunID: r.ID, Thread: r.Thread, Tenant: r.Tenant, Status: r.Status, AssistantID: d.AssistantID, Attempt: d.Attempt,
		StopReason: d.StopReason, Error: hideSecrets(d.Error),
		CreatedAt: time.Unix(0, r.CreatedAt).UTC().Format(time.RFC3339), UpdatedAt: time.Unix(0, r.UpdatedAt).UTC().Format(time.RFC3339)}
}

// runsCmd lists the runs cairn serve keeps in the store.
func (a *app) runsCmd() *cobra.Command {
	var thread, tenant string
	var statuses []string
	var limit int
	var cancel, retry bool
	cmd := &cobra.Command{
		Use:   "runs [RUN]",
		Short: "List the runs cairn serve keeps in the store (newest first), or show one with its event count",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, st := range statuses {
				if !slices.Contains(runStatuses, st) {
					return usagef("--status %q: want one of %v", st, runStatuses)
				}
			}
			if limit < 0 {
				return usagef("--limit %d: must not be negative", limit)
			}
			if cancel || retry {
				if len(args) != 1 || (cancel && retry) {
					return usagef("--cancel and --retry take one run: cairn runs RUN --cancel, or cairn runs RUN --retry")
				}
				return a.actOnQueuedRun(cmd.Context(), args[0], retry)
			}
			s, err := a.openRead()
			if err != nil {
				return err
			}
			defer s.Close()
			rl, err := store.RunLogOf(s)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				return a.showRun(cmd, rl, args[0])
			}
			recs, err := rl.Runs(cmd.Context(), store.RunQuery{Tenant: tenant, Thread: thread, Status: statuses, Limit: limit})
			if err != nil {
				return argError(err)
			}
			views := make([]runView, len(recs))
			for i, r := range recs {
				views[i] = viewOfRun(r)
			}
			return a.printRuns(views)
		},
	}
	cmd.Flags().StringVar(&thread, "thread", "", "only this thread's runs")
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's runs")
	cmd.Flags().StringArrayVar(&statuses, "status", nil, "only runs with this status (pending, running, success, error, interrupted; repeatable)")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many runs (0: all)")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "cancel the queued run RUN (PostgreSQL stores): at once if no worker has it, else before its next step")
	cmd.Flags().BoolVar(&retry, "retry", false, "queue the failed or cancelled run RUN again (PostgreSQL stores): it resumes from its last checkpoint")
	return cmd
}

// actOnQueuedRun cancels or retries a queued run (cairn runs RUN
// --cancel / --retry).
func (a *app) actOnQueuedRun(ctx context.Context, id string, retry bool) error {
	flag := "--cancel"
	if retry {
		flag = "--retry"
	}
	s, _, queue, err := a.queueBackend(ctx, "cairn runs "+flag)
	if err != nil {
		return err
	}
	defer s.Close()
	svc, err := a.queueService(s, queue, nil)
	if err != nil {
		return err
	}
	if !retry {
		if err := svc.CancelQueued(ctx, id); err != nil {
			return argError(err)
		}
		fmt.Fprintf(a.stderr, "run %s: cancelled\n", id)
		return nil
	}
	rec, err := svc.RetryQueued(ctx, id)
	if err != nil {
		return argError(err)
	}
	fmt.Fprintf(a.stderr, "run %s: queued again (attempt %d)\n", id, viewOfRun(rec).Attempt)
	return nil
}

func (a *app) showRun(cmd *cobra.Command, rl store.RunLog, id string) error {
	rec, err := rl.Run(cmd.Context(), id)
	if err != nil {
		return argError(err)
	}
	evs, err := rl.Events(cmd.Context(), id, 0, 0)
	if err != nil {
		return err
	}
	v := viewOfRun(rec)
	n := len(evs)
	v.Events = &n
	if a.json {
		return a.printJSON(v)
	}
	return a.printRuns([]runView{v})
}

func (a *app) printRuns(views []runView) error {
	if a.json {
		if views == nil {
			views = []runView{}
		}
		return a.printJSON(views)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tTHREAD\tASSISTANT\tSTATUS\tATTEMPT\tUPDATED\tEVENTS\tERROR")
	for _, v := range views {
		events := "-"
		if v.Events != nil {
			events = fmt.Sprint(*v.Events)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", v.RunID, v.Thread, v.AssistantID, v.Status, v.Attempt, v.UpdatedAt, events, v.Error)
	}
	return tw.Flush()
}
