package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/runs"
	"github.com/cairn-dev/cairn/store"
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
	as, err := runs.LoadAssistant(path, runs.AssistantConfig{Getenv: a.getenv, AllowedRoot: f.safeDir})
	if err != nil {
		return &usageError{err}
	}
	input, err := queuedInput(f)
	if err != nil {
		return err
	}
	s, _, queue, err := a.queueBackend(ctx, "cairn run --queue")
	if err != nil {
		return err
	}
	defer s.Close()
	svc, err := a.queueService(s, queue, []runs.Assistant{as})
	if err != nil {
		return err
	}
	thread := f.thread
	if thread == "" {
		thread = agentfile.NewThreadID(as.Info().ID, time.Now())
	}
	rec, err := svc.QueueRun(ctx, thread, as.Info().ID, input)
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

// queueService is the run service of a command that queues runs, or acts
// on queued ones, on the store's queue (no HTTP server: the service does
// the work).
func (a *app) queueService(s store.Store, q store.RunQueue, list []runs.Assistant) (*runs.Service, error) {
	return runs.New(runs.Config{Store: s, Assistants: list, Queue: q, Logger: a.logger})
}
