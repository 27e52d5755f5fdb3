package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/store"
)

func (a *app) threadsCmd() *cobra.Command {
	var tenant string
	var meta []string
	var limit int
	cmd := &cobra.Command{
		Use:   "threads",
		Short: "List threads",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filter := store.ThreadFilter{Tenant: tenant, Limit: limit}
			for _, kv := range meta {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usagef("--meta %q: want key=value", kv)
				}
				if filter.Metadata == nil {
					filter.Metadata = map[string]any{}
				}
				var parsed any
				if json.Unmarshal([]byte(v), &parsed) != nil {
					parsed = v // a bare word is a string
				}
				filter.Metadata[k] = parsed
			}
			s, err := a.openRead()
			if err != nil {
				return err
			}
			defer s.Close()
			var list []store.Thread
			var damaged []error // a damaged thread record hides no other thread
			for t, err := range s.Threads(cmd.Context(), filter) {
				var ce *store.CorruptError
				switch {
				case errors.As(err, &ce) && ce.Thread != "":
					damaged = append(damaged, err)
				case err != nil:
					return argError(err)
				default:
					list = append(list, t)
				}
			}
			if err := a.printThreads(list); err != nil {
				return err
			}
			for _, err := range damaged {
				fmt.Fprintf(a.stderr, "cairn: %v\n", err)
			}
			if len(damaged) > 0 {
				return fmt.Errorf("%w: %d thread records damaged (listed above)", store.ErrCorrupt, len(damaged))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only threads of this tenant")
	cmd.Flags().StringArrayVar(&meta, "meta", nil, "only threads whose metadata key equals value (key=value, repeatable)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many threads")
	return cmd
}

// printThreads prints a thread listing as a table or JSON.
func (a *app) printThreads(list []store.Thread) error {
	if a.json {
		type threadJSON struct {
			ID        string         `json:"id"`
			Tenant    string         `json:"tenant,omitempty"`
			Head      int64          `json:"head"`
			CreatedAt time.Time      `json:"created_at"`
			UpdatedAt time.Time      `json:"updated_at"`
			Metadata  map[string]any `json:"metadata,omitempty"`
		}
		out := make([]threadJSON, 0, len(list))
		for _, t := range list {
			out = append(out, threadJSON{t.ID, t.Tenant, t.Head, t.CreatedAt.UTC(), t.UpdatedAt.UTC(), t.Metadata})
		}
		return a.printJSON(out)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tHEAD\tUPDATED\tTENANT")
	for _, t := range list {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", t.ID, t.Head, t.UpdatedAt.Local().Format(time.DateTime), t.Tenant)
	}
	return tw.Flush()
}
