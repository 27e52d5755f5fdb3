package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/server"
)

// queueRunCLI queues a run of an agent or pipeline file for workers
// (cairn run --queue): checked as a run is, recorded and queued in one
// transaction; workers that serve the file (by its name) run it.
func (a *app) queueRunCLI(ctx context.Context, path string, f runFlags) error {
	for name, set := range map[string]bool{"--model": f.model != "", "--durability": f.durability != "sync" && f.durability != ""} {
		if set {
			return usagef("%s does not go with --queue: workers run the file as they serve it", name)
		}
	}
	as, err := server.LoadAssistant(path, server.AssistantConfig{Getenv: a.getenv, AllowedRoot: f.safeDir})
	if err != nil {
		return &usageError{err}
	}
	input, err := queuedInput(f)
	if err != nil {
		return err
	}
	s, _, err := a.queueBackend(ctx, "cairn run --queue")
	if err != nil {
		return err
	}
	defer s.Close()
	srv, err := server.New(server.Config{Store: s, Assistants: []server.Assistant{as}, Queue: true, Logger: a.logger})
	if err != nil {
		return err
	}
	thread := f.thread
	if thread == "" {
		thread = agentfile.NewThreadID(as.Info().ID, time.Now())
	}
	rec, err := srv.QueueRun(ctx, thread, as.Info().ID, input)
	if err != nil {
		return argError(err)
	}
	if a.json {
		return a.printJSON(map[string]string{"kind": "queued", "thread": rec.Thread, "run_id": rec.ID, "assistant": as.Info().ID})
	}
	fmt.Fprintf(a.stderr, "thread %s: queued run %s of %s (cairn runs %s; cairn state %s)\n", rec.Thread, rec.ID, as.Info().ID, rec.ID, rec.Thread)
	return nil
}

// queuedInput is the run's input as the API takes it: text as a JSON
// string, a .json file as its JSON.
func queuedInput(f runFlags) (json.RawMessage, error) {
	if f.inputPath == "" {
		if f.inputText == "" {
			return nil, nil
		}
		return json.Marshal(f.inputText)
	}
	in, err := agentfile.ReadInput(f.inputPath)
	if err != nil {
		return nil, &usageError{err}
	}
	return in.Content, nil // JSON, or a text input's JSON string
}
