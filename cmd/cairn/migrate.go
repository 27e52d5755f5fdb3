package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/store"
)

// migrateCmd shows and applies the store's migrations.
func (a *app) migrateCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "migrate [status|up|sql]",
		Short: "Show the store's layout version and migrations, apply the pending ones, or print their SQL",
		Long: "status (the default) lists every migration of the store's backend as applied or pending; up applies the pending ones " +
			"(a new store is made from the baseline, the latest layout at once); sql prints the SQL up would run without running it " +
			"(--all: every migration). status and sql never create or change anything. Read-write commands migrate by themselves.",
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: []string{"status", "up", "sql"},
		RunE: func(cmd *cobra.Command, args []string) error {
			action := "status"
			if len(args) == 1 {
				action = args[0]
			}
			if err := store.CheckURL(a.storeURL); err != nil {
				return &usageError{fmt.Errorf("--store: %w", err)}
			}
			switch action {
			case "status":
				return a.migrateStatus(cmd)
			case "up":
				return a.migrateUp(cmd)
			case "sql":
				return a.migrateSQL(cmd, all)
			}
			return usagef("migrate %q: want status, up or sql", action)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "with sql: print every migration, not only the pending ones")
	return cmd
}

// layout reads the store's layout; a store that does not exist yet is
// version 0 for up and sql, an error for status.
func (a *app) layout(cmd *cobra.Command, missingOK bool) (store.Layout, error) {
	l, err := store.MigrationsOf(cmd.Context(), a.storeURL)
	switch {
	case err == nil:
		return l, nil
	case missingOK && errors.Is(err, store.ErrNotFound):
		l.Version = 0
		return l, nil
	case errors.Is(err, store.ErrInvalidArgument):
		return l, &usageError{fmt.Errorf("--store: %w", err)}
	}
	return l, fmt.Errorf("--store %s: %w", a.shownStore(), err)
}

func (a *app) migrateStatus(cmd *cobra.Command) error {
	l, err := a.layout(cmd, false)
	if err != nil {
		return err
	}
	st := store.MigrationStatuses(l.Migrations, l.Version)
	if a.json {
		list := make([]map[string]any, len(st))
		for i, m := range st {
			list[i] = map[string]any{"version": m.Version, "name": m.Name, "applied": m.Applied}
		}
		return a.printJSON(map[string]any{"version": l.Version, "latest": store.Latest(l.Migrations), "migrations": list})
	}
	fmt.Fprintf(a.stdout, "store %s: format %d, latest %d\n", a.shownStore(), l.Version, store.Latest(l.Migrations))
	for _, m := range st {
		state := "pending"
		if m.Applied {
			state = "applied"
		}
		fmt.Fprintf(a.stdout, "%04d_%-12s %s\n", m.Version, m.Name, state)
	}
	if l.Version == 0 {
		fmt.Fprintln(a.stdout, "no Cairn store yet: cairn migrate up creates one from the baseline")
	}
	return nil
}

func (a *app) migrateUp(cmd *cobra.Command) error {
	before, err := a.layout(cmd, true)
	if errors.Is(err, store.ErrRecoveryNeeded) {
		if err := a.recoverStore(); err != nil {
			return err
		}
		before, err = a.layout(cmd, true)
	}
	if err != nil {
		return err
	}
	opts, err := a.storeOptions()
	if err != nil {
		return err
	}
	s, err := store.Open(cmd.Context(), a.storeURL, store.OpenOptions{Store: opts})
	if err != nil {
		return fmt.Errorf("--store %s: %w", a.shownStore(), err)
	}
	defer s.Close()
	// An encrypted store's heads are classified with its keys (format 6).
	classified, err := s.ClassifyThreads(cmd.Context())
	switch {
	case errors.Is(err, store.ErrNoKey):
		fmt.Fprintf(a.stderr, "cairn: the thread index of this encrypted store needs its keys to classify the threads' statuses: run cairn migrate up again with CAIRN_ENCRYPTION_KEYS (a listing by status does it too)\n")
	case err != nil:
		return fmt.Errorf("--store %s: classifying threads: %w", a.shownStore(), err)
	}
	latest := store.Latest(before.Migrations)
	var applied []string
	switch {
	case before.Version == latest:
	case before.Version == 0:
		applied = append(applied, fmt.Sprintf("baseline (format %d)", latest))
	default:
		for _, m := range store.Pending(before.Migrations, before.Version) {
			applied = append(applied, fmt.Sprintf("%04d_%s", m.Version, m.Name))
		}
	}
	if a.json {
		return a.printJSON(map[string]any{"from": before.Version, "to": latest, "applied": applied, "classified_threads": classified})
	}
	if classified > 0 {
		fmt.Fprintf(a.stdout, "store %s: %d threads classified by their heads (an encrypted store's statuses)\n", a.shownStore(), classified)
	}
	if len(applied) == 0 {
		fmt.Fprintf(a.stdout, "store %s: format %d, nothing to migrate\n", a.shownStore(), latest)
		return nil
	}
	fmt.Fprintf(a.stdout, "store %s: format %d → %d: %s\n", a.shownStore(), before.Version, latest, strings.Join(applied, ", "))
	return nil
}

func (a *app) migrateSQL(cmd *cobra.Command, all bool) error {
	l, err := a.layout(cmd, true)
	if err != nil {
		return err
	}
	list := store.Pending(l.Migrations, l.Version)
	switch {
	case all:
		list = l.Migrations
	case l.Version == 0:
		fmt.Fprintf(a.stdout, "-- baseline: a new store at format %d\n%s", store.Latest(l.Migrations), l.Baseline)
		return nil
	case len(list) == 0:
		fmt.Fprintf(a.stdout, "-- format %d: nothing to migrate\n", l.Version)
		return nil
	}
	for _, m := range list {
		fmt.Fprintf(a.stdout, "-- %04d_%s\n%s", m.Version, m.Name, m.SQL)
		if m.Go != "" {
			fmt.Fprintf(a.stdout, "-- then a Go step %s\n", m.Go)
		}
	}
	return nil
}
