package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/cairn-dev/cairn/internal/gcpace"
)

func main() {
	if os.Getenv("GOGC") == "" {
		// A store's states are large and long-lived: pace the collector
		// by the live heap rather than doubling it (internal/gcpace).
		gcpace.Start(0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run executes the CLI and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	root := newRoot(stdout, stderr, getenv)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	// The default redactor is a last safety net: errors of runs are
	// redacted with the run's own configuration already.
	fmt.Fprintf(stderr, "cairn: %s\n", hideSecrets(err.Error()))
	var ie *interruptedError
	if errors.As(err, &ie) {
		return exitInterrupted
	}
	var de *departedError
	if errors.As(err, &de) {
		return exitDeparted
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}
