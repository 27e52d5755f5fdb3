package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

// steerCmd sends a message to a thread's running run (or its next run,
// --follow-up) through the thread's inbox in the store.
func (a *app) steerCmd() *cobra.Command {
	var followUp, noRun bool
	var tenant string
	cmd := &cobra.Command{
		Use:   "steer THREAD TEXT",
		Short: "Send a message to a thread's running run, taken at its next model call (--follow-up: a new run once it ends)",
		Long: "steer adds TEXT, as a human message, to the inbox of THREAD, a thread of a chat (kind: chat) or of a graph with a messages field. " +
			"A running run takes it at its next step boundary (a chat's next model call), in whichever process runs it; the checkpoint of that step records it, " +
			"so it is taken exactly once, even across crashes. With --follow-up it waits for the run to end. " +
			"On a thread of cairn run whose last run finished (none is running), steer runs the thread's file on it at once, with the options it was started with, and the run takes the message first; " +
			"a thread whose run is running or unfinished (continue it with cairn resume) takes it when it goes on, as does one of cairn serve (whose HTTP route starts the run).",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := store.ValidateID(args[0]); err != nil {
				return &usageError{fmt.Errorf("thread: %w", err)}
			}
			s, err := a.openExisting()
			if err != nil {
				return err
			}
			defer s.Close()
			ctx := runs.WithTenant(cmd.Context(), tenant)
			th, err := s.Thread(ctx, store.ThreadKey(tenant, args[0]))
			if errors.Is(err, store.ErrNotFound) {
				return usagef("thread %q not found in %s", args[0], a.shownStore())
			}
			if err != nil {
				return err
			}
			var as []runs.Assistant
			if file, ok := th.Metadata["file"].(string); ok && file != "" {
				ast, err := runs.LoadAssistant(file, runs.AssistantConfig{Getenv: a.getenv})
				if err != nil {
					return fmt.Errorf("thread %q runs %s: %w", args[0], file, err)
				}
				as = append(as, ast)
			}
			svc, err := runs.New(runs.Config{Store: s, Assistants: as})
			if err != nil {
				return err
			}
			msg, _ := json.Marshal(args[1]) // a string always marshals
			it, err := svc.Steer(ctx, args[0], msg, followUp)
			if errors.Is(err, runs.ErrInvalidInput) || errors.Is(err, runs.ErrState) || errors.Is(err, runs.ErrNotFound) {
				return &usageError{err}
			}
			if err != nil {
				return err
			}
			if a.json {
				if err := a.printJSON(it); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "thread %s: %s %d accepted (%s)\n", args[0], it.Kind, it.Seq, it.State)
			}
			if noRun || tenant != "" {
				return nil
			}
			return a.runSteered(ctx, s, th)
		},
	}
	cmd.Flags().BoolVar(&followUp, "follow-up", false, "wait for the thread's run to end, then start a new run with the message")
	cmd.Flags().BoolVar(&noRun, "no-run", false, "only add the message to the inbox, even when no run is running: the thread's next run (cairn run --thread, cairn resume, a server's) takes it")
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant whose thread it is (cairn serve with API keys)")
	return cmd
}

// runSteered runs a cairn run thread's file on the thread, with the
// options it was started with and no new input, when its last run
// finished: the run's first step takes the inbox's pending entries. A
// thread of another program, or whose run is running or unfinished, is
// left for its next run (the message stays pending).
func (a *app) runSteered(ctx context.Context, s store.Store, th store.Thread) error {
	o := runOptionsOf(th)
	if o.File == "" || o.Kind == agentfile.KindPipeline {
		fmt.Fprintf(a.stderr, "thread %s: its next run takes the message (cairn steer runs only threads of cairn run)\n", th.ID)
		return nil
	}
	head, err := s.Load(ctx, store.LoadRequest{Thread: th.ID})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	// A chat's thread is always free for a new turn (CheckStart): its head
	// says whether a run is under way (or was cut short).
	if err := checkRunThread(ctx, s, th.ID, o); err != nil || (err == nil && th.Head > 0 && agentfile.Unfinished(head)) {
		fmt.Fprintf(a.stderr, "thread %s: its run is running or unfinished: it takes the message at its next model call (or cairn resume %s)\n", th.ID, th.ID)
		return nil
	}
	return a.runAgentFile(ctx, o.File, runFlags{thread: th.ID, model: o.Model, durability: cmp.Or(o.Durability, "sync"), safeDir: o.SafeDir})
}
