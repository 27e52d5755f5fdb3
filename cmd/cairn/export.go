package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/tracefile"
)

func (a *app) exportCmd() *cobra.Command {
	var format, dir, out string
	cmd := &cobra.Command{
		Use:   "export THREAD --format trace|session-log|gate-files --dir DIR | --format bundle --out FILE",
		Short: "Write a thread as files: trace (manifest.json, events.jsonl, steps.jsonl), session-log, gate-files (.state layout), or a bundle (cairn import)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "trace" && format != "session-log" && format != "gate-files" && format != "bundle" {
				return usagef("--format %q: supported formats: trace, session-log, gate-files, bundle", format)
			}
			if format == "bundle" && (out == "" || dir != "") {
				return usagef("--format bundle writes one file: give --out FILE (- for stdout), not --dir")
			}
			if format != "bundle" && out != "" {
				return usagef("--format %s writes a directory: give --dir, not --out (--out is for --format bundle)", format)
			}
			if format != "bundle" && dir == "" {
				return usagef("--dir is required with --format %s (or --format bundle --out FILE)", format)
			}
			s, err := a.openRead()
			if err != nil {
				return err
			}
			defer s.Close()
			if _, err := s.Thread(cmd.Context(), args[0]); err != nil {
				return argError(err)
			}
			switch format {
			case "bundle":
				return a.exportBundle(cmd.Context(), s, args[0], out)
			case "session-log":
				path, err := tracefile.ExportSessionLog(cmd.Context(), s, args[0], dir, time.Now())
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "wrote %s\n", path)
				return nil
			case "gate-files":
				paths, err := pipeline.ExportGateFiles(cmd.Context(), s, args[0], dir)
				if err != nil {
					return err
				}
				for _, p := range paths {
					fmt.Fprintf(a.stdout, "wrote %s\n", p)
				}
				return nil
			}
			m, err := tracefile.Export(cmd.Context(), s, args[0], dir)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(m)
			}
			fmt.Fprintf(a.stdout, "wrote %s/manifest.json, events.jsonl, steps.jsonl: %d checkpoints, status %s, stop reason %s\n", dir, m.Summary.Steps, m.Status, m.Summary.StopReason)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "trace", "trace, session-log, gate-files or bundle")
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write into (trace, session-log, gate-files)")
	cmd.Flags().StringVar(&out, "out", "", "file to write the bundle to, - for stdout (bundle)")
	return cmd
}
