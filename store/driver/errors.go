package driver

import (
	"errors"
	"fmt"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrNotFound: no such thread or checkpoint.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: the checkpoint named as head is no longer the head, or the
	// thread to create exists.
	ErrConflict = errors.New("store: conflict")
	// ErrInvalidID: a thread id or namespace breaks the naming rules.
	ErrInvalidID = errors.New("store: invalid id")
	// ErrInvalidArgument: a request is malformed.
	ErrInvalidArgument = errors.New("store: invalid argument")
	// ErrCorrupt: stored data is damaged.
	ErrCorrupt = errors.New("store: corrupt data")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrUnsupportedFormat: the database was written by a newer Cairn.
	ErrUnsupportedFormat = errors.New("store: unsupported format version")
	// ErrNotStore: the database exists but is not a Cairn store (another
	// program's database, or one whose Cairn tables are gone). Nothing was
	// written to it.
	ErrNotStore = errors.New("store: not a Cairn store")
	// ErrReadOnly: a write on a store opened read-only.
	ErrReadOnly = errors.New("store: opened read-only")
	// ErrMigrationNeeded: the store's layout is older than this code's and
	// the open was told not to migrate it (OpenOptions.NoMigrate); `cairn
	// migrate up` (or any read-write open) upgrades it.
	ErrMigrationNeeded = errors.New("store: migration needed")
	// ErrRecoveryNeeded: a crash left a write unfinished (SQLite's hot
	// rollback journal) that only a read-write open can roll back, so a
	// read-only open refuses the store without changing it; `cairn migrate
	// up` (or any read-write open) rolls the write back.
	ErrRecoveryNeeded = errors.New("store: recovery needed")
	// ErrUnavailable: the database could not be reached or went away
	// (a server restarting, a dropped connection). What was being
	// written may or may not have committed; retrying later, from what
	// the store then says, is safe.
	ErrUnavailable = errors.New("store: database unavailable")
)

// CorruptError says which checkpoint is damaged.
type CorruptError struct {
	Thread    string
	Namespace string
	Seq       int64
	What      string // "patch", "snapshot", "metadata", "row", "thread record"
	Err       error
}

func (e *CorruptError) Error() string {
	at := ""
	if e.Namespace != "" {
		at = " namespace " + e.Namespace
	}
	if e.Seq != 0 {
		at += fmt.Sprintf(" seq %d", e.Seq)
	}
	if e.Thread == "" {
		if at == "" {
			return fmt.Sprintf("store: corrupt %s: %v", e.What, e.Err)
		}
		return fmt.Sprintf("store:%s: corrupt %s: %v", at, e.What, e.Err)
	}
	return fmt.Sprintf("store: thread %q%s: corrupt %s: %v", e.Thread, at, e.What, e.Err)
}

// Unwrap returns both ErrCorrupt and the cause.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }
