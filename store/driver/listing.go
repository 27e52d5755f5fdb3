package driver

// ThreadSort orders a thread listing. Ties are broken by thread id, in the
// same direction.
type ThreadSort uint8

// Orders of a thread listing.
const (
	// SortCreated: by creation time.
	SortCreated ThreadSort = iota
	// SortUpdated: by the time of the root head (Thread.UpdatedAt).
	SortUpdated
	// SortID: by thread id.
	SortID
	// SortStatus: by status (error, idle, interrupted).
	SortStatus
	// SortStatusAt: by the time the thread's status was set, which for an
	// interrupted or failed thread is the time of its head; only with a
	// Status filter of one status other than idle (the approvals inbox:
	// interrupted, oldest first).
	SortStatusAt
)

// MetaFilter is one metadata filter as a backend applies it: the threads
// that have the entry (Key, Value) in the metadata index; with Not, the
// threads whose stored metadata has no top-level member Key (as it is,
// not in its indexed form) or has it null.
type MetaFilter struct {
	Key, Value string
	Not        bool
}

// Drive names the index a backend reads first for a ListQuery; the other
// filters are checked on each thread it reads. The engine chooses it from
// the store's counters: an index read in the listing's order when enough
// of its threads match, else the smallest filter's threads, sorted.
type Drive uint8

// Drives.
const (
	// DriveOrder: the index of the listing's order (tenant first).
	DriveOrder Drive = iota
	// DriveIDs: the threads ListQuery.IDs names.
	DriveIDs
	// DriveMeta: the metadata index entries of ListQuery.Meta[0] (a
	// filter without Not), which are in creation order.
	DriveMeta
	// DriveStatus: the status index (tenant, status, then creation time or
	// the time of the status), which holds only the threads that are not
	// idle.
	DriveStatus
)

// ListQuery is a ThreadSearch as a backend answers it (Backend.ListThreads,
// Backend.CountThreads): metadata filters in their indexed form, and the
// index to read first.
type ListQuery struct {
	Tenant     string
	AllTenants bool
	Meta       []MetaFilter
	IDs        []string // nil: any
	Exclude    []string
	Status     []ThreadStatus // nil: any
	Sort       ThreadSort
	Desc       bool
	Offset     int
	Limit      int // 0: no limit
	Drive      Drive
	// Window, with SortUpdated and DriveOrder, is how far (Unix
	// nanoseconds) a thread's touch time may be from its head's time, both
	// ways (2 × TouchSlack): a backend reads the threads whose touch time
	// is within Window of the one at Offset+Limit in touch order, and
	// orders those by their heads' times.
	Window int64
}

// IndexCounts are the counters a backend keeps in step with its threads.
type IndexCounts struct {
	// Status counts the threads of each status.
	Status map[ThreadStatus]int64
	// Meta counts, for each filter asked for, the threads that have its
	// entry (0 for a filter with Not, whose key has no entry of its own).
	Meta []int64
}

// Total is the number of threads the counters count (every status).
func (c IndexCounts) Total() int64 {
	var n int64
	for _, v := range c.Status {
		n += v
	}
	return n
}
