package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model/anthropic"
	"github.com/cairn-dev/cairn/model/openai"
	"github.com/cairn-dev/cairn/model/scripted"
	"github.com/cairn-dev/cairn/spec"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
)

// exitInterrupted is the exit code of a run that stopped to wait for input.
const exitInterrupted = 3

// interruptedError makes run() exit with exitInterrupted.
type interruptedError struct{ thread string }

func (e *interruptedError) Error() string {
	return fmt.Sprintf("thread %q is waiting for input: cairn resume %s --answer VALUE", e.thread, e.thread)
}

// parseModel reads --model: scripted:FILE, openai-compatible:MODEL[@BASE_URL]
// or anthropic:MODEL.
func parseModel(s string) (agent.Model, error) {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok || rest == "" {
		return nil, usagef("--model %q: want scripted:FILE, openai-compatible:MODEL[@BASE_URL] or anthropic:MODEL", s)
	}
	switch kind {
	case "scripted":
		m, err := scripted.Load(rest)
		if err != nil {
			return nil, &usageError{fmt.Errorf("--model: %w", err)}
		}
		return m, nil
	case "openai-compatible":
		name, base, _ := strings.Cut(rest, "@")
		m, err := openai.New(openai.Config{Model: name, BaseURL: base})
		if err != nil {
			return nil, &usageError{fmt.Errorf("--model: %w", err)}
		}
		return agent.WithRetry(m, agent.RetryPolicy{}), nil
	case "anthropic":
		m, err := anthropic.New(anthropic.Config{Model: rest})
		if err != nil {
			return nil, &usageError{fmt.Errorf("--model: %w", err)}
		}
		return agent.WithRetry(m, agent.RetryPolicy{}), nil
	}
	return nil, usagef("--model %q: unknown provider %q", s, kind)
}

// progress prints a line per step on stderr, or every event as a JSON line
// on stdout with --json.
func (a *app) progress() func(flow.Event) {
	var mu sync.Mutex
	start := time.Now()
	enc := json.NewEncoder(a.stdout)
	return func(e flow.Event) {
		mu.Lock()
		defer mu.Unlock()
		if a.json {
			_ = enc.Encode(e)
			return
		}
		switch e.Kind {
		case flow.EventStepEnd:
			tok := ""
			if e.Tokens.Input+e.Tokens.Output > 0 {
				tok = fmt.Sprintf(", tokens %d in / %d out", e.Tokens.Input, e.Tokens.Output)
			}
			fmt.Fprintf(a.stderr, "  ✓ %-16s checkpoint %-4d %6.0f ms%s\n", strings.Join(e.Nodes, ","), e.Seq, float64(time.Since(start).Microseconds())/1000, tok)
		case flow.EventError:
			fmt.Fprintf(a.stderr, "  ✗ step failed: %s\n", e.Err)
		case flow.EventInterrupt:
			fmt.Fprintf(a.stderr, "  ? %s is waiting for input: %s\n", e.Node, e.Payload)
		}
	}
}

func (a *app) runCmd() *cobra.Command {
	var inputPath, inputText, thread, modelSpec, durability string
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run an agent file (.md: Markdown with YAML front matter) or a gate pipeline (.yaml), committing every step",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if inputPath != "" && inputText != "" {
				return usagef("give --input or --input-text, not both")
			}
			d, err := flow.ParseDurability(durability)
			if err != nil {
				return &usageError{fmt.Errorf("--durability: %w", err)}
			}
			if ext := strings.ToLower(filepath.Ext(args[0])); ext == ".yaml" || ext == ".yml" {
				return a.runPipeline(cmd, args[0], thread, modelSpec)
			}
			af, err := spec.LoadAgentFile(args[0])
			if err != nil {
				return &usageError{err}
			}
			var model agent.Model
			if modelSpec != "" {
				if model, err = parseModel(modelSpec); err != nil {
					return err
				}
			}
			in := spec.TextInput("inline", inputText)
			if inputPath != "" {
				if in, err = spec.ReadInput(inputPath); err != nil {
					return &usageError{err}
				}
			}
			if thread == "" {
				thread = spec.ThreadID(af.Name)
			}
			if err := store.ValidateThreadID(thread); err != nil {
				return &usageError{fmt.Errorf("--thread: %w", err)}
			}
			s, err := a.open()
			if err != nil {
				return err
			}
			defer s.Close()
			if err := ensureThread(cmd.Context(), s, thread, "agent", args[0]); err != nil {
				return err
			}
			if !a.json {
				fmt.Fprintf(a.stderr, "running %s on thread %q (%s)\n", af.Name, thread, a.storeURL)
			}
			res, err := spec.RunAgent(cmd.Context(), af, spec.RunConfig{Store: s, Thread: thread, Input: in, Model: model, Durability: d, Observer: a.progress()})
			return a.report(res, err)
		},
	}
	cmd.Flags().StringVar(&inputPath, "input", "", "input file (.json is parsed as JSON, anything else is text)")
	cmd.Flags().StringVar(&inputText, "input-text", "", "input text")
	cmd.Flags().StringVar(&thread, "thread", "", "thread id (default: the agent's name)")
	cmd.Flags().StringVar(&modelSpec, "model", "", "override the file's model: scripted:FILE, openai-compatible:MODEL[@BASE_URL], anthropic:MODEL")
	cmd.Flags().StringVar(&durability, "durability", "sync", "sync, async or exit")
	return cmd
}

func (a *app) resumeCmd() *cobra.Command {
	var answer string
	cmd := &cobra.Command{
		Use:   "resume THREAD [--answer VALUE]",
		Short: "Continue a run after a crash, a failed step or an interrupt",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.open()
			if err != nil {
				return err
			}
			defer s.Close()
			th, err := s.Thread(cmd.Context(), args[0])
			if err != nil {
				return argError(err)
			}
			file, _ := th.Metadata["file"].(string)
			if file == "" {
				return fmt.Errorf("thread %q was not started by cairn run; resume it from the program that runs it", args[0])
			}
			if th.Metadata["kind"] == "pipeline" {
				return a.runPipeline(cmd, file, args[0], "")
			}
			af, err := spec.LoadAgentFile(file)
			if err != nil {
				return err
			}
			if !a.json {
				fmt.Fprintf(a.stderr, "resuming %s on thread %q\n", af.Name, args[0])
			}
			cfg := spec.RunConfig{Store: s, Thread: args[0], Observer: a.progress()}
			if cmd.Flags().Changed("answer") {
				var v any
				if json.Unmarshal([]byte(answer), &v) != nil {
					v = answer
				}
				cfg.Answer = v
			}
			res, err := spec.ResumeAgent(cmd.Context(), af, cfg)
			return a.report(res, err)
		},
	}
	cmd.Flags().StringVar(&answer, "answer", "", "the answer to an interrupt (JSON, or plain text)")
	return cmd
}

// report prints how a run ended.
func (a *app) report(res *spec.AgentResult, err error) error {
	if err != nil {
		if res != nil && res.Thread != "" {
			return fmt.Errorf("%w (thread %q: fix the cause and run cairn resume %s)", err, res.Thread, res.Thread)
		}
		return err
	}
	for r := res; r != nil; r = r.Next {
		if a.json {
			_ = a.printJSON(map[string]any{"agent": r.Agent, "thread": r.Thread, "namespace": r.Namespace, "stop_reason": r.Result.StopReason,
				"head": r.Result.Head, "final_output": r.FinalOutput, "output_file": r.OutputFile})
		} else {
			fmt.Fprintf(a.stdout, "%s: %s after %d steps", r.Agent, r.Result.StopReason, r.Result.Progress.Steps)
			if r.OutputFile != "" {
				fmt.Fprintf(a.stdout, ", wrote %s", r.OutputFile)
			}
			fmt.Fprintln(a.stdout)
			if r.Next == nil && len(r.FinalOutput) > 0 {
				var s string
				if json.Unmarshal(r.FinalOutput, &s) == nil {
					fmt.Fprintln(a.stdout, s)
				} else {
					fmt.Fprintln(a.stdout, string(r.FinalOutput))
				}
			}
		}
		if r.Result.StopReason == state.StopInterrupt {
			return &interruptedError{thread: r.Thread}
		}
	}
	return nil
}

// ensureThread creates the thread on its first run, remembering which file
// runs it so that cairn resume can find it.
func ensureThread(ctx context.Context, s store.Store, thread, kind, file string) error {
	_, err := s.Thread(ctx, thread)
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	_, err = s.CreateThread(ctx, store.Thread{ID: thread, Metadata: map[string]any{"kind": kind, "file": abs}})
	return err
}
