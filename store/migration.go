package store

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/store/driver"
)

// Migration is one numbered step of a backend's layout: the store records
// the number of the last one applied (its format version). SQL is the
// embedded migration file; Go, when not empty, says what a Go step run
// after the SQL does (work SQL cannot do, such as computing checksums).
type Migration = driver.Migration

// MigrationStatus is a migration and whether a store has it.
type MigrationStatus struct {
	Migration
	Applied bool
}

// Layout is what MigrationsOf reports of a store: its version, the
// driver's migrations and baseline.
type Layout struct {
	Version    int
	Migrations []Migration
	Baseline   string
}

// MigrationsOf reads the layout of the store a URL names without changing
// anything. A scheme whose driver has no versioned layouts (memory:) is
// ErrInvalidArgument.
func MigrationsOf(ctx context.Context, url string) (Layout, error) {
	d, err := driverOf(url)
	if err != nil {
		return Layout{}, err
	}
	if err := d.Check(url); err != nil {
		return Layout{}, err
	}
	md, ok := d.(driver.MigratingDriver)
	if !ok {
		return Layout{}, fmt.Errorf("%w: store URL %q: %s stores have no migrations", ErrInvalidArgument, url, Scheme(url))
	}
	list, baseline := md.Migrations()
	v, err := md.Version(ctx, url)
	return Layout{Version: v, Migrations: list, Baseline: baseline}, err
}

// MigrationStatuses lists the migrations with whether a store at version v has them.
func MigrationStatuses(list []Migration, v int) []MigrationStatus {
	out := make([]MigrationStatus, len(list))
	for i, m := range list {
		out[i] = MigrationStatus{Migration: m, Applied: m.Version <= v}
	}
	return out
}

// Pending returns the migrations a store at version v lacks, oldest first.
func Pending(list []Migration, v int) []Migration { return driver.Pending(list, v) }

// Latest is the version of the newest migration.
func Latest(list []Migration) int { return driver.Latest(list) }
