package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/store"
)

// namespaceHint tells, on stderr, which other namespaces the thread has.
func (a *app) namespaceHint(ctx context.Context, s store.Store, thread, shown string) error {
	list, err := s.Namespaces(ctx, thread)
	if err != nil {
		return argError(err)
	}
	var others []string
	for _, n := range list {
		if n.Name != shown {
			others = append(others, fmt.Sprintf("%s (%d)", orRoot(n.Name), n.Checkpoints))
		}
	}
	if len(others) > 0 {
		fmt.Fprintf(a.stderr, "other namespaces (checkpoints): %s; see one with cairn history %s --ns NAME, all with cairn namespaces %s\n",
			strings.Join(others, ", "), thread, thread)
	}
	return nil
}

// checkNamespace fails with store.ErrNotFound, naming the thread's
// namespaces, when ns is not one of them.
func checkNamespace(ctx context.Context, s store.Store, thread, ns string) error {
	if ns == "" {
		return nil
	}
	list, err := s.Namespaces(ctx, thread)
	if err != nil {
		return argError(err)
	}
	names := make([]string, 0, len(list))
	for _, n := range list {
		if n.Name == ns {
			return nil
		}
		names = append(names, orRoot(n.Name))
	}
	return fmt.Errorf("%w: thread %q has no namespace %q; its namespaces: %s", store.ErrNotFound, thread, ns, strings.Join(names, ", "))
}

// orRoot names the root namespace.
func orRoot(ns string) string {
	if ns == "" {
		return `"" (root)`
	}
	return ns
}

func (a *app) namespacesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "namespaces THREAD",
		Short: "List a thread's namespaces: the root, and each gate, handoff or subgraph with its own checkpoints",
		Long:  "Every namespace listed can be read with cairn state THREAD --ns NAME and cairn history THREAD --ns NAME.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openRead()
			if err != nil {
				return err
			}
			defer s.Close()
			list, err := s.Namespaces(cmd.Context(), args[0])
			if err != nil {
				return argError(err)
			}
			if a.json {
				type nsJSON struct {
					Name        string    `json:"ns"`
					Head        int64     `json:"head"`
					Checkpoints int64     `json:"checkpoints"`
					UpdatedAt   time.Time `json:"updated_at"`
				}
				out := make([]nsJSON, 0, len(list))
				for _, n := range list {
					out = append(out, nsJSON{n.Name, n.Head, n.Checkpoints, n.UpdatedAt.UTC()})
				}
				return a.printJSON(out)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAMESPACE\tHEAD\tCHECKPOINTS\tUPDATED")
			for _, n := range list {
				name := n.Name
				if name == "" {
					name = "-"
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", name, n.Head, n.Checkpoints, n.UpdatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
}
