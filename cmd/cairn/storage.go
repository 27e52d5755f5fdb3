package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/store"
)

func (a *app) storageCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "storage THREAD",
		Short: "Where a thread's stored bytes go: checkpoints (patches, metadata, snapshots) by channel and namespace, pending writes, runs and run event logs",
		Long: "Bytes are those of the data as stored (compressed, and sealed in an encrypted store). A checkpoint's patch bytes are shared out among the " +
			"top-level state fields (channels) its operations change, a snapshot's among the fields it holds; what no field claims is unattributed. " +
			"The store is read a page of checkpoints at a time; nothing is written. --json prints the same object as GET /threads/{id}/storage.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openRead()
			if err != nil {
				return err
			}
			defer s.Close()
			st, err := store.ThreadStorageOf(cmd.Context(), s, args[0])
			if err != nil {
				return argError(err)
			}
			if a.json {
				return a.printJSON(st)
			}
			return printStorage(a.stdout, st)
		},
	}
}

// printStorage draws a thread's storage report as three tables: by kind
// of row, by channel (largest first) and by namespace.
func printStorage(w io.Writer, st store.ThreadStorage) error {
	fmt.Fprintf(w, "thread %s: %d bytes stored (%s)\n\n", st.ThreadID, st.TotalBytes, humanBytes(st.TotalBytes))
	share := func(n int64) string {
		if st.TotalBytes == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(st.TotalBytes))
	}
	c := st.Checkpoints
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STORED\tROWS\tBYTES\tSHARE")
	for _, r := range []struct {
		what  string
		rows  string
		bytes int64
	}{
		{"checkpoints", fmt.Sprint(c.Count), c.Bytes},
		{"  patches", "", c.PatchBytes},
		{"  metadata", "", c.MetadataBytes},
		{"snapshots", fmt.Sprint(c.Snapshots), c.SnapshotBytes},
		{"pending writes", fmt.Sprint(st.PendingWrites.Count), st.PendingWrites.Bytes},
		{"runs", fmt.Sprint(st.Runs.Count), st.Runs.Bytes},
		{"run events", fmt.Sprint(st.RunEvents.Count), st.RunEvents.Bytes},
	} {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", r.what, r.rows, r.bytes, share(r.bytes))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANNEL\tPATCH BYTES\tSNAPSHOT BYTES\tSHARE")
	fields := slices.SortedFunc(maps.Keys(st.Channels), func(x, y string) int {
		a, b := st.Channels[x], st.Channels[y]
		return cmp.Or(cmp.Compare(b.Bytes+b.SnapshotBytes, a.Bytes+a.SnapshotBytes), cmp.Compare(x, y))
	})
	for _, f := range fields {
		u := st.Channels[f]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", f, u.Bytes, u.SnapshotBytes, share(u.Bytes+u.SnapshotBytes))
	}
	if u := st.Unattributed; u != (store.ChannelUsage{}) {
		fmt.Fprintf(tw, "(unattributed)\t%d\t%d\t%s\n", u.Bytes, u.SnapshotBytes, share(u.Bytes+u.SnapshotBytes))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tCHECKPOINTS\tBYTES\tSNAPSHOTS\tSNAPSHOT BYTES\tPENDING WRITES\tWRITE BYTES")
	for _, ns := range st.Namespaces {
		name, n := ns.Namespace, ns.Checkpoints
		if name == "" {
			name = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\n", name, n.Count, n.Bytes, n.Snapshots, n.SnapshotBytes, ns.PendingWrites.Count, ns.PendingWrites.Bytes)
	}
	return tw.Flush()
}
