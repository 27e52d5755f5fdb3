package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/jsontext"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// checkpointJSON is how the CLI prints a checkpoint.
type checkpointJSON struct {
	Thread    string          `json:"thread"`
	Namespace string          `json:"ns,omitempty"`
	Seq       int64           `json:"seq"`
	Parent    int64           `json:"parent"`
	Status    store.Status    `json:"status"`
	Nodes     []string        `json:"nodes,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	Snapshot  bool            `json:"snapshot,omitempty"`
	Meta      store.Meta      `json:"meta"`
	Patch     state.Patch     `json:"patch,omitempty"`
	State     json.RawMessage `json:"state,omitempty"`
	// PrunedBefore, in a history, marks a checkpoint whose parent a prune
	// deleted: what is left of its branch begins there.
	PrunedBefore bool `json:"pruned_before,omitempty"`
}

func toJSON(cp store.Checkpoint) checkpointJSON {
	out := checkpointJSON{Thread: cp.Thread, Namespace: cp.Namespace, Seq: cp.Seq, Parent: cp.Parent, Status: cp.Status,
		Nodes: cp.Nodes, CreatedAt: cp.CreatedAt.UTC(), Snapshot: cp.Snapshot, Meta: cp.Meta, Patch: cp.Patch}
	if cp.HasState {
		out.State = cp.State.AppendJSON(nil)
	}
	return out
}

func (a *app) stateCmd() *cobra.Command {
	var at int64
	var ns string
	cmd := &cobra.Command{
		Use:   "state THREAD",
		Short: "Print the state of a thread (its head, or --at a checkpoint)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if at < 0 {
				return usagef("--at %d: want a checkpoint seq ≥ 1", at)
			}
			s, err := a.openRead()
			if err != nil {
				return err
			}
			defer s.Close()
			if err := checkNamespace(cmd.Context(), s, args[0], ns); err != nil {
				return err
			}
			cp, err := s.Load(cmd.Context(), store.LoadRequest{Thread: args[0], Namespace: ns, Seq: at})
			if err != nil {
				return argError(err)
			}
			if a.json {
				return a.printJSON(toJSON(cp))
			}
			rw := jsontext.NewWriter(a.stdout)
			ind := newIndenter(rw)
			if _, err := cp.State.WriteJSON(ind); err != nil {
				return err
			}
			return errors.Join(ind.Close(), rw.Flush())
		},
	}
	cmd.Flags().Int64Var(&at, "at", 0, "checkpoint seq (default: the head)")
	cmd.Flags().StringVar(&ns, "ns", "", "namespace (a gate, a handoff, a subgraph: see cairn namespaces); default the root")
	return cmd
}

func (a *app) historyCmd() *cobra.Command {
	var limit int
	var before int64
	var ns string
	var states, tree bool
	cmd := &cobra.Command{
		Use:   "history THREAD",
		Short: "List a thread's checkpoints, newest first, with branches marked",
		Long: "Lists the checkpoints of one namespace of a thread (the root by default; --ns for a gate, a handoff or a subgraph; " +
			"cairn namespaces THREAD lists them). --states adds each checkpoint's full state: a STATE column in the table, a state field with --json.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 || before < 0 {
				return usagef("--limit and --before must not be negative")
			}
			if tree && states && !a.json {
				return usagef("--states does not combine with --tree: drop --tree for a table with a STATE column, or add --json")
			}
			s, err := a.openRead()
			if err != nil {
				return err
			}
			defer s.Close()
			if _, err := s.Thread(cmd.Context(), args[0]); err != nil {
				return argError(err)
			}
			if err := checkNamespace(cmd.Context(), s, args[0], ns); err != nil {
				return err
			}
			req := store.HistoryRequest{Thread: args[0], Namespace: ns, Limit: limit, Before: before, WithState: states}
			var cps []store.Checkpoint
			for cp, err := range s.History(cmd.Context(), req) {
				if err != nil {
					return argError(err)
				}
				cps = append(cps, cp)
			}
			cut, err := prunedBefore(cmd.Context(), s, cps)
			if err != nil {
				return argError(err)
			}
			if a.json {
				out := make([]checkpointJSON, 0, len(cps))
				for _, cp := range cps {
					j := toJSON(cp)
					j.PrunedBefore = cut[cp.Seq]
					out = append(out, j)
				}
				return a.printJSON(out)
			}
			if tree {
				for _, line := range renderTree(cps, cut) {
					fmt.Fprintln(a.stdout, line)
				}
			} else if err := a.historyTable(cps, states, cut); err != nil {
				return err
			}
			return a.namespaceHint(cmd.Context(), s, args[0], ns)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many checkpoints")
	cmd.Flags().Int64Var(&before, "before", 0, "start below this seq")
	cmd.Flags().StringVar(&ns, "ns", "", "namespace (a gate, a handoff, a subgraph: see cairn namespaces); default the root")
	cmd.Flags().BoolVar(&states, "states", false, "include every checkpoint's full state (a STATE column, or a state field with --json)")
	cmd.Flags().BoolVar(&tree, "tree", false, "draw the history as a tree, oldest first, branches indented")
	return cmd
}

// historyTable prints checkpoints as a table, with their states as compact
// JSON in a last column when asked.
func (a *app) historyTable(cps []store.Checkpoint, states bool, cut map[int64]bool) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	head := "SEQ\tPARENT\tSTATUS\tNODES\tCREATED\tCHANGE"
	if states {
		head += "\tSTATE"
	}
	fmt.Fprintln(tw, head)
	for _, cp := range cps {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s", cp.Seq, cp.Parent, cp.Status, orDash(strings.Join(cp.Nodes, ",")),
			cp.CreatedAt.Local().Format("2006-01-02 15:04:05.000"), describeIn(cp, cut))
		if states {
			fmt.Fprintf(tw, "\t%s", jsontext.Readable(cp.State.AppendJSON(nil)))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// renderTree draws checkpoints as a tree, oldest first: a line of history
// stays at one depth; where a checkpoint has several children, each branch
// is drawn one level deeper.
func renderTree(cps []store.Checkpoint, cut map[int64]bool) []string {
	bySeq := map[int64]store.Checkpoint{}
	children := map[int64][]int64{}
	var roots []int64
	for _, cp := range cps {
		bySeq[cp.Seq] = cp
	}
	for _, cp := range cps {
		if _, ok := bySeq[cp.Parent]; ok {
			children[cp.Parent] = append(children[cp.Parent], cp.Seq)
		} else {
			roots = append(roots, cp.Seq)
		}
	}
	for k := range children {
		slices.Sort(children[k])
	}
	slices.Sort(roots)
	var lines []string
	label := func(cp store.Checkpoint) string {
		return fmt.Sprintf("%d %s %s  %s", cp.Seq, cp.Status, orDash(strings.Join(cp.Nodes, ",")), describeIn(cp, cut))
	}
	var walk func(seq int64, prefix string)
	walk = func(seq int64, prefix string) {
		for {
			cp := bySeq[seq]
			lines = append(lines, prefix+label(cp))
			kids := children[seq]
			if len(kids) == 0 {
				return
			}
			if len(kids) == 1 {
				seq = kids[0]
				continue
			}
			for i, k := range kids {
				branch, rest := "├─ ", "│  "
				if i == len(kids)-1 {
					branch, rest = "└─ ", "   "
				}
				saved := lines
				lines = nil
				walk(k, "")
				sub := lines
				lines = saved
				for j, l := range sub {
					if j == 0 {
						lines = append(lines, prefix+branch+l)
					} else {
						lines = append(lines, prefix+rest+l)
					}
				}
			}
			return
		}
	}
	for _, r := range roots {
		walk(r, "")
	}
	return lines
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// describe summarises a checkpoint's change in one line.
func describe(cp store.Checkpoint) string {
	var parts []string
	if cp.Meta.ForkedFrom != nil {
		from := cp.Meta.ForkedFrom
		if from.Thread == cp.Thread {
			parts = append(parts, fmt.Sprintf("fork of %d", from.Seq))
		} else {
			parts = append(parts, fmt.Sprintf("fork of %s@%d", from.Thread, from.Seq))
		}
	} else if cp.Parent != 0 && cp.Parent != cp.Seq-1 {
		parts = append(parts, fmt.Sprintf("branch from %d", cp.Parent))
	}
	if cp.Meta.Source == flow.SourceStop {
		parts = append(parts, "stopped: "+cp.Meta.StopReason)
	}
	if cp.Meta.Error != "" {
		parts = append(parts, "error: "+cp.Meta.Error)
	}
	ops := make([]string, 0, len(cp.Patch))
	for i, op := range cp.Patch {
		if i == 4 {
			ops = append(ops, fmt.Sprintf("… %d more", len(cp.Patch)-i))
			break
		}
		ops = append(ops, op.Op+" "+op.Path)
	}
	if len(ops) > 0 {
		parts = append(parts, strings.Join(ops, ", "))
	}
	return orDash(strings.Join(parts, "; "))
}
