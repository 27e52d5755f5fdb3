package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

func (a *app) forkCmd() *cobra.Command {
	var at int64
	var into, ns string
	var sets []string
	cmd := &cobra.Command{
		Use:   "fork THREAD --at SEQ [--into NEW] [--set FIELD=JSON]...",
		Short: "Branch from a checkpoint: a new head of the thread, or a new thread with --into",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case !cmd.Flags().Changed("at"):
				return usagef("--at is required: the checkpoint seq to fork from")
			case at <= 0:
				return usagef("--at %d: a checkpoint seq is 1 or more", at)
			}
			var patch state.Patch
			for _, kv := range sets {
				field, raw, ok := strings.Cut(kv, "=")
				if !ok || field == "" {
					return usagef("--set %q: want FIELD=JSON", kv)
				}
				if !json.Valid([]byte(raw)) {
					return usagef("--set %s: %q is not JSON (quote strings: --set %s='\"text\"')", field, raw, field)
				}
				patch = append(patch, state.Op{Op: state.OpAdd, Path: state.FieldPointer(field), Value: json.RawMessage(raw)})
			}
			s, err := a.openExisting()
			if err != nil {
				return err
			}
			defer s.Close()
			cp, err := s.Fork(cmd.Context(), store.ForkRequest{Thread: args[0], Namespace: ns, At: at, Into: into, Patch: patch})
			if err != nil {
				return argError(err)
			}
			if a.json {
				return a.printJSON(toJSON(cp))
			}
			fmt.Fprintf(a.stdout, "forked %s@%d into %s@%d\n", args[0], at, cp.Thread, cp.Seq)
			return nil
		},
	}
	cmd.Flags().Int64Var(&at, "at", 0, "checkpoint seq to fork from (required)")
	cmd.Flags().StringVar(&into, "into", "", "new thread id (default: a branch in the same thread)")
	cmd.Flags().StringVar(&ns, "ns", "", "namespace (subgraph); default the root")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "set a top-level field of the forked state (FIELD=JSON, repeatable)")
	return cmd
}
