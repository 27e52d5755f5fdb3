package store

import (
	"time"

	"github.com/cairn-dev/cairn/store/driver"
)

// ThreadStatus is what a thread's root head says of it: the status
// listings filter and sort by (error, idle, interrupted; String and
// ParseThreadStatus). The numbers order the statuses as their names do
// (error < idle < interrupted), so an index on the number sorts by name.
type ThreadStatus = driver.ThreadStatus

// Thread statuses. A thread without checkpoints is idle.
const (
	// ThreadStatusUnknown is the status of a thread whose head could not
	// be classified when an encrypted store was upgraded (its stop reason
	// is sealed); the engine classifies it with its keys before a listing
	// filters or sorts by status.
	ThreadStatusUnknown = driver.ThreadStatusUnknown
	// ThreadError: the head's step failed.
	ThreadError = driver.ThreadError
	// ThreadIdle: no head, or a head that finished.
	ThreadIdle = driver.ThreadIdle
	// ThreadInterrupted: the head paused at an interrupt, waiting for an
	// answer.
	ThreadInterrupted = driver.ThreadInterrupted
)

// ParseThreadStatus reads a status name: error, idle or interrupted.
func ParseThreadStatus(name string) (ThreadStatus, error) { return driver.ParseThreadStatus(name) }

// ThreadStatusOf is the status a thread whose root head is cp has: error
// for a failed step, interrupted for a pause (an INTERRUPTED checkpoint, or
// one whose run stopped at an interrupt), idle otherwise.
func ThreadStatusOf(cp Checkpoint) ThreadStatus {
	return driver.StatusOf(cp.Status, cp.Meta.StopReason)
}

// TouchSlack bounds how far a thread's stored touch time (the index
// SortUpdated reads) may lag its head's time: the engine writes it with a
// root row only when the status changes or the last touch it wrote is
// TouchSlack old, so an ordinary commit writes nothing more than its row
// (a thread committing steps back to back writes its touch ten times a
// second at most). A listing by head time reads, besides its page, the
// threads touched within twice the slack of the page's end, and orders
// them by their heads' times.
const TouchSlack = 100 * time.Millisecond
