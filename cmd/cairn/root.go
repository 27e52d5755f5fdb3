package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/internal/jsontext"
	"github.com/cairn-dev/cairn/model"
	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/store"
	_ "github.com/cairn-dev/cairn/store/inmem"
	_ "github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// usageError marks errors in how the command was called (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// usageArgs makes the argument checks of c and its subcommands return
// usage errors (exit 2), so no error has to be recognised by its text.
func usageArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return &usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

// app holds the global flags and the output streams.
type app struct {
	storeURL string
	json     bool
	// streamMode is --stream-mode of run and resume ("" for the default);
	// traceDir their --trace-dir.
	streamMode, traceDir string
	// logLevel and logFormat are --log-level and --log-format; logger is
	// what they make (set before a command runs).
	logLevel, logFormat string
	logger              *slog.Logger
	// redacted counts the node updates of this command's runs a secret
	// was redacted from (their run_end events), told once after the run.
	redacted atomic.Int64
	stdout   io.Writer
	stderr   io.Writer
	getenv   func(string) string
	// items is the long-term memory store of the agent files cairn serve
	// and cairn worker run (nil: each run's store's own).
	items store.ItemStore
	// models resolves the model providers of the agent files cairn serve
	// and cairn worker run (nil: model.Defaults(); a benchmark sets its own).
	models *model.Registry
}

func newRoot(stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	a := &app{stdout: stdout, stderr: stderr, getenv: getenv}
	root := &cobra.Command{
		Use:           "cairn",
		Short:         "Durable state for multi-agent workflows",
		Long:          "cairn runs agent files and gate pipelines, and inspects and drives Cairn stores: threads, namespaces, state, history (a tree), forks, resume, exports, pruning and the built-in benchmark.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		// SuggestionsFor reads it as is (cobra sets its default of 2 only on
		// its own unknown-command path).
		SuggestionsMinimumDistance: 2,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				if near := cmd.SuggestionsFor(args[0]); len(near) > 0 {
					return usagef("unknown command %q for %q; did you mean %s?", args[0], cmd.CommandPath(), strings.Join(near, " or "))
				}
				return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	def := getenv("CAIRN_STORE")
	if def == "" {
		def = sqlite.DefaultURL
	}
	root.PersistentFlags().StringVar(&a.storeURL, "store", def, "store URL: sqlite:PATH[?durability=strict], postgres://USER@HOST:PORT/DB[?search_path=SCHEMA] or inmem: (env CAIRN_STORE)")
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print JSON")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "warn", "log on stderr from this level: debug, info, warn, error (never a state value or a secret)")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", "text", "log format: text or json")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return a.setLogger() }
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(a.threadsCmd(), a.stateCmd(), a.historyCmd(), a.namespacesCmd(), a.runCmd(), a.resumeCmd(), a.forkCmd(), a.pruneCmd(), a.copyCmd(), a.deleteCmd(), a.exportCmd(), a.migrateCmd(), a.benchCmd(), a.serveCmd(), a.workerCmd(), a.keysCmd(), a.runsCmd(), a.rekeyCmd(), a.versionCmd(), a.benchServeCmd())
	root.AddCommand(a.storageCmd())
	root.AddCommand(a.importCmd())
	root.AddCommand(a.replayCmd())
	root.AddCommand(a.steerCmd())
	usageArgs(root)
	return root
}

// urlPassword finds the password of a URL's user info (postgres://u:pw@h).
var urlPassword = regexp.MustCompile(`(://[^/\s:@]*:)[^@\s/]*@`)

// hideSecrets hides what must never be shown: URL passwords and whatever
// the default redactor finds (key=value secrets, key shapes).
func hideSecrets(s string) string {
	return redact.Default().String(urlPassword.ReplaceAllString(s, "${1}xxxxx@"))
}

// shownStore is the --store URL as shown in progress and messages.
func (a *app) shownStore() string { return hideSecrets(a.storeURL) }

// open opens the store named by --store.
func (a *app) open() (*store.Engine, error) {
	if err := store.CheckURL(a.storeURL); err != nil {
		return nil, &usageError{fmt.Errorf("--store: %w", err)}
	}
	opts, err := a.storeOptions()
	if err != nil {
		return nil, err
	}
	return store.Open(context.Background(), a.storeURL, store.OpenOptions{Store: opts})
}

// openRead opens the store named by --store for reading only: it never
// creates a file, a directory or a table, and refuses a database that is not
// a Cairn store without changing it.
func (a *app) openRead() (*store.Engine, error) {
	if err := store.CheckURL(a.storeURL); err != nil {
		return nil, &usageError{fmt.Errorf("--store: %w", err)}
	}
	opts, err := a.storeOptions()
	if err != nil {
		return nil, err
	}
	s, err := store.Open(context.Background(), a.storeURL, store.OpenOptions{ReadOnly: true, Store: opts})
	if err != nil {
		return nil, fmt.Errorf("--store %s: %w", a.shownStore(), err)
	}
	return s, nil
}

// openExisting opens the store named by --store for writing, after checking
// read-only that it exists and is a Cairn store: commands that change a
// thread (fork, resume, prune) never create a store.
// A store a crash left with an unfinished write (store.ErrRecoveryNeeded)
// is recovered first.
func (a *app) openExisting() (*store.Engine, error) {
	r, err := a.openRead()
	if errors.Is(err, store.ErrRecoveryNeeded) {
		if err := a.recoverStore(); err != nil {
			return nil, err
		}
		return a.open()
	}
	if err != nil {
		return nil, err
	}
	if err := r.Close(); err != nil {
		return nil, err
	}
	return a.open()
}

// recoverStore rolls back the write a crash left unfinished in the store
// (store.ErrRecoveryNeeded) with a read-write open that neither creates nor
// migrates anything, and says so on stderr.
func (a *app) recoverStore() error {
	opts, err := a.storeOptions()
	if err != nil {
		return err
	}
	s, err := store.Open(context.Background(), a.storeURL, store.OpenOptions{Store: opts, NoMigrate: true})
	switch {
	case err == nil:
		err = s.Close()
	case errors.Is(err, store.ErrMigrationNeeded):
		err = nil // rolled back; what remains is for a migration
	}
	if err != nil {
		return fmt.Errorf("--store %s: %w", a.shownStore(), err)
	}
	fmt.Fprintf(a.stderr, "cairn: --store %s: rolled back a write a crash left unfinished\n", a.shownStore())
	return nil
}

// printJSON writes v as indented JSON, without HTML escaping (in stored
// values neither).
func (a *app) printJSON(v any) error {
	enc := jsontext.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// argError turns invalid ids and arguments into usage errors.
func argError(err error) error {
	if errors.Is(err, store.ErrInvalidID) || errors.Is(err, store.ErrInvalidArgument) {
		return &usageError{err}
	}
	return err
}

// setLogger makes the logger --log-level and --log-format ask for: on
// stderr, with secrets redacted from every message and attribute.
func (a *app) setLogger() error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(a.logLevel)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", a.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, at slog.Attr) slog.Attr {
		if at.Value.Kind() == slog.KindString {
			at.Value = slog.StringValue(hideSecrets(at.Value.String()))
		}
		return at
	}}
	switch a.logFormat {
	case "text":
		a.logger = slog.New(slog.NewTextHandler(a.stderr, opts))
	case "json":
		a.logger = slog.New(slog.NewJSONHandler(a.stderr, opts))
	default:
		return usagef("--log-format %q: want text or json", a.logFormat)
	}
	return nil
}
