package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/tracefile"
)

func (a *app) exportCmd() *cobra.Command {
	var format, dir string
	cmd := &cobra.Command{
		Use:   "export THREAD --format trace|session-log|gate-files --dir DIR",
		Short: "Write a thread as files: trace (manifest.json, events.jsonl, steps.jsonl), session-log, or gate-files (.state layout)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "trace" && format != "session-log" && format != "gate-files" {
				return usagef("--format %q: supported formats: trace, session-log, gate-files", format)
			}
			if dir == "" {
				return usagef("--dir is required")
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
	cmd.Flags().StringVar(&format, "format", "trace", "trace, session-log or gate-files")
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write into (required)")
	return cmd
}
