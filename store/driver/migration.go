package driver

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one numbered step of a backend's layout: the store records
// the number of the last one applied (its format version). SQL is the
// embedded migration file; Go, when not empty, says what a Go step run
// after the SQL does (work SQL cannot do, such as computing checksums).
type Migration struct {
	Version int
	Name    string
	SQL     string
	Go      string
}

// A MigratingDriver is a Driver whose stores have versioned layouts: a
// read-write open applies the pending migrations itself (unless
// OpenOptions.NoMigrate); a new store is made from the baseline, the
// latest layout at once. `cairn migrate` reads them here.
type MigratingDriver interface {
	Driver
	// Migrations lists the driver's migrations, oldest first, and the
	// baseline.
	Migrations() (list []Migration, baseline string)
	// Version reads the format version of the store a URL names, changing
	// nothing: 0 when there is no store there yet (ErrNotFound for a
	// SQLite file that does not exist; ErrNotStore for another program's
	// database).
	Version(ctx context.Context, url string) (int, error)
}

// Pending returns the migrations a store at version v lacks, oldest first.
func Pending(list []Migration, v int) []Migration {
	var out []Migration
	for _, m := range list {
		if m.Version > v {
			out = append(out, m)
		}
	}
	return out
}

// LoadMigrations reads the numbered migration files of dir in fsys
// ("0001_tables.sql", "0002_checksums.sql", …), with the Go steps goSteps
// describes by version. Numbers must run 1, 2, 3, … without gaps.
func LoadMigrations(fsys fs.FS, dir string, goSteps map[int]string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("%w: migration file %q: want NNNN_name.sql", ErrInvalidArgument, e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b), Go: goSteps[v]})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("%w: migration %d follows %d", ErrInvalidArgument, m.Version, i)
		}
	}
	return out, nil
}

// MustLoadMigrations is LoadMigrations for files embedded in the binary:
// they are part of the build, so an error is a bug and panics, as
// template.Must does.
func MustLoadMigrations(fsys fs.FS, dir string, goSteps map[int]string) []Migration {
	list, err := LoadMigrations(fsys, dir, goSteps)
	if err != nil {
		panic(err)
	}
	return list
}

// Latest is the version of the newest migration.
func Latest(list []Migration) int {
	if len(list) == 0 {
		return 0
	}
	return list[len(list)-1].Version
}
