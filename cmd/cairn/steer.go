package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
)

// steerCmd sends a message to a thread's running run (or its next run,
// --follow-up) through the thread's inbox in the store.
func (a *app) steerCmd() *cobra.Command {
	var followUp bool
	var tenant string
	cmd := &cobra.Command{
		Use:   "steer THREAD TEXT",
		Short: "Send a message to a thread's running run, taken at its next model call (--follow-up: a new run once it ends)",
		Long: "steer adds TEXT, as a human message, to the inbox of THREAD, a thread of a chat (kind: chat) or of a graph with a messages field. " +
			"A running run takes it at its next step boundary (a chat's next model call), in whichever process runs it; the checkpoint of that step records it, " +
			"so it is taken exactly once, even across crashes. A run that is not running takes it when it goes on. With --follow-up it waits for the run to end.",
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
				return a.printJSON(it)
			}
			fmt.Fprintf(a.stdout, "thread %s: %s %d accepted (%s)\n", args[0], it.Kind, it.Seq, it.State)
			return nil
		},
	}
	cmd.Flags().BoolVar(&followUp, "follow-up", false, "wait for the thread's run to end, then start a new run with the message")
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant whose thread it is (cairn serve with API keys)")
	return cmd
}
