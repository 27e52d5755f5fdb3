package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/replay"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// exitDeparted is the exit code of a replay that departed from the
// recording.
const exitDeparted = 4

// departedError makes run() exit with exitDeparted.
type departedError struct{ thread string }

func (e *departedError) Error() string {
	return fmt.Sprintf("the replay of thread %q departed from the recording", e.thread)
}

type replayFlags struct {
	from       int64
	ns, into   string
	file       string
	assistants string
}

func (a *app) replayCmd() *cobra.Command {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay THREAD [--from SEQ] [--ns NS] [--into NEW] [--file PATH | --assistants DIR]",
		Short: "Run a thread's runs again with the current code, every model and tool call answered from the recording, and report the first departure",
		Long: `replay re-executes the thread's recorded runs with the agent file or pipeline as it is now
(the thread's own file, or --file, or the one --assistants DIR holds under the thread's
assistant id). Every model call and tool call is answered from what the thread recorded for
that step: nothing outside is called. It reports the first checkpoint where the new run
departs (the state diff, and the first call whose request differs, with the difference),
or that it matched to the end. Exit 0: matched; 4: departed.

The replayed thread is never written to: the new run goes to memory, or with --into NEW
to a new thread NEW of the same store, to compare with cairn history or the UI.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.replay(cmd.Context(), args[0], f)
		},
	}
	cmd.Flags().Int64Var(&f.from, "from", 0, "start at this checkpoint (its state as recorded); default the beginning")
	cmd.Flags().StringVar(&f.ns, "ns", "", "namespace to replay; default the root")
	cmd.Flags().StringVar(&f.into, "into", "", "write the new run to this new thread (default: in memory only)")
	cmd.Flags().StringVar(&f.file, "file", "", "agent or pipeline file to replay with (default: the thread's own)")
	cmd.Flags().StringVar(&f.assistants, "assistants", "", "folder of agent and pipeline files (cairn serve's); the thread's assistant id picks one")
	return cmd
}

func (a *app) replay(ctx context.Context, thread string, f replayFlags) error {
	switch {
	case f.from < 0:
		return usagef("--from %d: a checkpoint seq is 1 or more", f.from)
	case f.file != "" && f.assistants != "":
		return usagef("--file and --assistants: give one")
	case f.into == thread:
		return usagef("--into %s: the new thread must be another thread; replay never writes to the one it replays", f.into)
	}
	s, err := a.openExisting()
	if err != nil {
		return err
	}
	defer s.Close()
	th, err := s.Thread(ctx, thread)
	if err != nil {
		return argError(err)
	}
	asst, err := a.replayAssistant(th, f)
	if err != nil {
		return err
	}
	rep, err := replay.Thread(ctx, s, thread, replay.Options{Assistant: asst, Namespace: f.ns, From: f.from, Into: f.into})
	if errors.Is(err, store.ErrConflict) {
		return &usageError{err} // --into names a thread that exists
	}
	if err != nil {
		return argError(err)
	}
	if a.json {
		if err := a.printJSON(rep); err != nil {
			return err
		}
	} else {
		a.printReport(rep)
	}
	if !rep.Matched {
		return &departedError{thread: thread}
	}
	return nil
}

// replayAssistant builds the code the thread is replayed with. Model API
// keys are not needed (nothing is called), so a missing one reads as a
// placeholder.
func (a *app) replayAssistant(th store.Thread, f replayFlags) (runs.Assistant, error) {
	o := runOptionsOf(th)
	getenv := func(k string) string {
		if v := a.getenv(k); v != "" || !strings.HasSuffix(k, "_KEY") {
			return v
		}
		return "replay-calls-no-model"
	}
	cfg := runs.AssistantConfig{Getenv: getenv, AllowedRoot: o.SafeDir}
	if o.Model != "" && f.file == "" && f.assistants == "" {
		m, err := parseModelEnv(o.Model, getenv)
		if err != nil {
			return nil, fmt.Errorf("thread %q was started with --model %s: %w", th.ID, o.Model, err)
		}
		cfg.Configure = func(rc *agentfile.RunConfig) { rc.Model = m }
	}
	if f.assistants != "" {
		all, err := runs.LoadAssistants(f.assistants, cfg)
		if err != nil {
			return nil, &usageError{err}
		}
		for _, k := range []string{"assistant_id", "graph_id"} {
			id, _ := th.Metadata[k].(string)
			for _, asst := range all {
				if id != "" && asst.Info().ID == id {
					return asst, nil
				}
			}
		}
		return nil, usagef("--assistants %s: no file for thread %q's assistant (metadata assistant_id or graph_id)", f.assistants, th.ID)
	}
	path := f.file
	if path == "" {
		path = o.File
	}
	if path == "" {
		return nil, usagef("thread %q names no agent or pipeline file (it was not started by cairn run): give --file or --assistants", th.ID)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	asst, err := runs.LoadAssistant(abs, cfg)
	if err != nil {
		return nil, &usageError{fmt.Errorf("--file %s: %w", path, err)}
	}
	return asst, nil
}

// printReport writes a report for people.
func (a *app) printReport(rep replay.Report) {
	if rep.Matched {
		fmt.Fprintf(a.stdout, "replayed %s: matched to the end (%d checkpoints, %d calls answered from the recording)\n", rep.Thread, rep.Checkpoints, rep.Calls)
		if rep.Into != "" {
			fmt.Fprintf(a.stdout, "new run in thread %s\n", rep.Into)
		}
		return
	}
	d := rep.Departure
	fmt.Fprintf(a.stdout, "replayed %s: departed at checkpoint %d", rep.Thread, d.Seq)
	if d.Node != "" {
		fmt.Fprintf(a.stdout, " (%s)", d.Node)
	}
	fmt.Fprintf(a.stdout, " after %d matching checkpoints: %s\n", rep.Checkpoints, d.Reason)
	if d.NewSeq != 0 {
		fmt.Fprintf(a.stdout, "new run: checkpoint %d (%s)\n", d.NewSeq, d.NewNode)
	}
	if d.Error != "" {
		fmt.Fprintf(a.stdout, "new run's error: %s\n", d.Error)
	}
	if c := d.Call; c != nil {
		fmt.Fprintf(a.stdout, "call %d of node %s (%s %s): %s\n", c.Index, c.Node, c.Kind, c.Name, c.Reason)
		printPatch(a, "request diff (recorded → new)", c.Diff)
	}
	printPatch(a, "state diff (recorded → new)", d.StateDiff)
	if rep.Into != "" {
		fmt.Fprintf(a.stdout, "new run in thread %s\n", rep.Into)
	}
}

func printPatch(a *app, title string, p state.Patch) {
	if len(p) == 0 {
		return
	}
	fmt.Fprintf(a.stdout, "%s:\n", title)
	for _, op := range p {
		line, _ := json.Marshal(op) // an op always encodes
		fmt.Fprintf(a.stdout, "  %s\n", line)
	}
}
