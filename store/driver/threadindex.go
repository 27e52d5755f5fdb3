package driver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/state"
)

// ThreadStatus is what a thread's root head says of it: the status
// listings filter and sort by. The numbers order the statuses as their
// names do (error < idle < interrupted), so an index on the number sorts
// by name.
type ThreadStatus uint8

// Thread statuses. A thread without checkpoints is idle.
const (
	// ThreadStatusUnknown is the status of a thread whose head could not
	// be classified when an encrypted store was upgraded (its stop reason
	// is sealed); the engine classifies it with its keys before a listing
	// filters or sorts by status.
	ThreadStatusUnknown ThreadStatus = iota
	// ThreadError: the head's step failed.
	ThreadError
	// ThreadIdle: no head, or a head that finished.
	ThreadIdle
	// ThreadInterrupted: the head paused at an interrupt, waiting for an
	// answer.
	ThreadInterrupted
)

var threadStatusNames = [...]string{"unknown", "error", "idle", "interrupted"}

func (s ThreadStatus) String() string {
	if int(s) < len(threadStatusNames) {
		return threadStatusNames[s]
	}
	return fmt.Sprintf("ThreadStatus(%d)", uint8(s))
}

// Valid reports whether s is error, idle or interrupted.
func (s ThreadStatus) Valid() bool { return s >= ThreadError && s <= ThreadInterrupted }

// ParseThreadStatus reads a status name: error, idle or interrupted.
func ParseThreadStatus(name string) (ThreadStatus, error) {
	for i, n := range threadStatusNames[1:] {
		if n == name {
			return ThreadStatus(i + 1), nil
		}
	}
	return 0, fmt.Errorf("%w: thread status %q (want error, idle or interrupted)", ErrInvalidArgument, name)
}

// StatusOf is the status of a thread whose root head has status s and
// stop reason stop (Meta.StopReason).
func StatusOf(s Status, stop string) ThreadStatus {
	switch {
	case s == StatusFailed:
		return ThreadError
	case s == StatusInterrupted, stop == string(state.StopInterrupt):
		return ThreadInterrupted
	}
	return ThreadIdle
}

// RowThreadStatus classifies a stored row as a thread's head, from its
// status and plaintext metadata, for backends filling the thread index of
// stores written before it (format 6). It reports false for a row whose
// metadata is sealed in its patch (an encrypted store), whose stop reason
// only the engine, with its keys, can read.
func RowThreadStatus(r *Row) (ThreadStatus, bool) {
	if r.Status == StatusFailed || r.Status == StatusInterrupted {
		return StatusOf(r.Status, ""), true
	}
	if len(r.Meta) == 0 {
		return ThreadIdle, !Sealed(r.Patch)
	}
	var m struct {
		StopReason string `json:"stop_reason"`
	}
	if err := json.Unmarshal(r.Meta, &m); err != nil {
		return ThreadIdle, true // a damaged row is reported when it is read
	}
	return StatusOf(r.Status, m.StopReason), true
}

// HeadUpdate is what a row written as its thread's new root head sets of
// the thread's listing columns (Row.Head): its status, and the row's time
// as the time of that status and as the thread's last touch.
type HeadUpdate struct {
	Status ThreadStatus
}

// MetaEntry is one entry of the thread metadata index: a top-level key
// and a value, both in their indexed form (IndexEntries).
type MetaEntry struct {
	Key, Value string
}

// maxIndexed is the longest key or value the index holds as it is; a
// longer one is indexed by its SHA-256 (a B-tree entry stays small, and
// equality still means equality).
const maxIndexed = 256

// IndexForm is the indexed form of a key or a canonical value.
func IndexForm(s string) string {
	if len(s) <= maxIndexed {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "#" + hex.EncodeToString(sum[:])
}

// ScalarForm is the canonical JSON of a metadata scalar (compact, without
// HTML escapes, numbers as float64 writes them) in its indexed form, or
// false for an object or array. Filters and stored metadata both go
// through it, so they meet on the same string.
func ScalarForm(v any) (string, bool, error) {
	switch v.(type) {
	case map[string]any, []any:
		return "", false, nil
	}
	b, err := marshalPlain(v)
	if err != nil {
		return "", false, err
	}
	if len(b) > 0 && (b[0] == '{' || b[0] == '[') {
		return "", false, nil
	}
	return IndexForm(string(b)), true, nil
}

// MetaPresent is the value of the entry every top-level metadata key whose
// value is not null has, whatever the value: backends count these entries
// (so that the threads where a key is absent or null are counted too) but
// keep no index of them — a filter for a key absent or null is checked on
// each thread's stored metadata.
const MetaPresent = "*"

// IndexEntries returns the metadata index entries of a thread's stored
// metadata (a JSON object, or nil): for every top-level key whose value
// is not null, the entry (key, MetaPresent), and for a scalar value the
// entry (key, its canonical JSON). Every backend counts exactly these and
// indexes all but the MetaPresent ones, so filters match alike
// everywhere. The entries are sorted and distinct.
func IndexEntries(md []byte) ([]MetaEntry, error) {
	if len(md) == 0 {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(md, &m); err != nil {
		return nil, fmt.Errorf("%w: thread metadata: %v", ErrInvalidArgument, err)
	}
	out := make([]MetaEntry, 0, 2*len(m))
	for k, v := range m {
		if v == nil {
			continue
		}
		key := IndexForm(k)
		out = append(out, MetaEntry{key, MetaPresent})
		val, ok, err := ScalarForm(v)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, MetaEntry{key, val})
		}
	}
	slices.SortFunc(out, func(a, b MetaEntry) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
	return slices.Compact(out), nil
}

// DiffEntries returns the entries of before that after lacks, and those
// of after that before lacks; both lists are sorted (IndexEntries).
func DiffEntries(before, after []MetaEntry) (gone, added []MetaEntry) {
	for _, e := range before {
		if _, found := slices.BinarySearchFunc(after, e, compareEntries); !found {
			gone = append(gone, e)
		}
	}
	for _, e := range after {
		if _, found := slices.BinarySearchFunc(before, e, compareEntries); !found {
			added = append(added, e)
		}
	}
	return gone, added
}

func compareEntries(a, b MetaEntry) int {
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	return strings.Compare(a.Value, b.Value)
}

// ShardOf spreads the counters of one tenant over shards (a backend with
// concurrent writers keeps a counter in several rows, so that two
// transactions rarely wait for the same row): the shard of a thread, from
// its id.
func ShardOf(id string, shards int) int {
	var h uint32 = 2166136261
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return int(h % uint32(shards))
}
