package driver

import "context"

// ThreadLoader is a Backend that writes a whole thread at once, in one
// transaction: its record, rows, pending writes, runs and their events
// (store.ImportBundle). Nothing of the thread is visible before the
// commit, and a process killed during the load leaves nothing of it.
type ThreadLoader interface {
	// LoadThread creates t.Thread with everything in t. It fails with
	// ErrConflict, writing nothing, when the thread exists or a run id is
	// taken.
	LoadThread(ctx context.Context, t ThreadLoad) error
}

// ThreadLoad is a whole thread as ThreadLoader writes it; every blob is
// as the engine stores it (encoded, sealed when the store is encrypted)
// and every checksum is set.
type ThreadLoad struct {
	// Thread is the thread record to create.
	Thread ThreadRecord
	// Rows are the thread's rows, each after its parent; their Create and
	// NewThread are unset. The last row of the root namespace carries the
	// thread's status (Row.Head).
	Rows []Row
	// Writes are the pending writes of rows of Rows.
	Writes []RowWrites
	// Runs are the thread's runs (store.RunLog), for a backend that keeps
	// them.
	Runs []LoadRun
}

// RowWrites are the pending writes of one row.
type RowWrites struct {
	Namespace string
	Seq       int64
	Writes    []Write
}

// LoadRun is a run record of a loaded thread (its thread and tenant are
// the thread's) and its event log.
type LoadRun struct {
	ID        string
	Status    string
	CreatedAt int64
	UpdatedAt int64
	Data      []byte
	Events    []LoadEvent
}

// LoadEvent is one event of a run's log, as the run log stores it.
type LoadEvent struct {
	Seq  int64
	Data []byte
}
