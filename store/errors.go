package store

import "github.com/cairn-dev/cairn/store/driver"

// Sentinel errors; test with errors.Is. Each is the very value of the
// driver package's sentinel of the same name (store/driver), so an error
// a backend returns matches it.
var (
	// ErrNotFound: no such thread or checkpoint.
	ErrNotFound = driver.ErrNotFound
	// ErrConflict: the checkpoint named as head is no longer the head, or the
	// thread to create exists.
	ErrConflict = driver.ErrConflict
	// ErrInvalidID: a thread id or namespace breaks the naming rules.
	ErrInvalidID = driver.ErrInvalidID
	// ErrInvalidArgument: a request is malformed.
	ErrInvalidArgument = driver.ErrInvalidArgument
	// ErrCorrupt: stored data is damaged.
	ErrCorrupt = driver.ErrCorrupt
	// ErrClosed: the store was closed.
	ErrClosed = driver.ErrClosed
	// ErrUnsupportedFormat: the database was written by a newer Cairn.
	ErrUnsupportedFormat = driver.ErrUnsupportedFormat
	// ErrNotStore: the database exists but is not a Cairn store (another
	// program's database, or one whose Cairn tables are gone). Nothing was
	// written to it.
	ErrNotStore = driver.ErrNotStore
	// ErrReadOnly: a write on a store opened read-only.
	ErrReadOnly = driver.ErrReadOnly
	// ErrMigrationNeeded: the store's layout is older than this code's and
	// the open was told not to migrate it (OpenOptions.NoMigrate); `cairn
	// migrate up` (or any read-write open) upgrades it.
	ErrMigrationNeeded = driver.ErrMigrationNeeded
	// ErrRecoveryNeeded: a crash left a write unfinished (SQLite's hot
	// rollback journal) that only a read-write open can roll back, so a
	// read-only open refuses the store without changing it; `cairn migrate
	// up` (or any read-write open) rolls the write back.
	ErrRecoveryNeeded = driver.ErrRecoveryNeeded
	// ErrUnavailable: the database could not be reached or went away
	// (a server restarting, a dropped connection). What was being
	// written may or may not have committed; retrying later, from what
	// the store then says, is safe.
	ErrUnavailable = driver.ErrUnavailable
)

// CorruptError says which checkpoint is damaged: Thread, Namespace, Seq
// (what is known of them), What ("patch", "snapshot", "metadata", "row",
// "thread record") and the cause, Err. It unwraps to both ErrCorrupt and
// the cause. (It is driver.CorruptError, which backends return too.)
type CorruptError = driver.CorruptError
