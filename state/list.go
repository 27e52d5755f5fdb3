package state

import (
	"encoding/json"
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// list is one version of a JSON array kept as its elements. Versions derived
// by appending share one backing array: a version may append in place only
// while nobody has appended past its end, which the shared tail records.
// Every other change copies. Old versions therefore never see a change.
type list struct {
	items []json.RawMessage
	tail  *listTail
	// bytes is the elements' total length (Footprint reads it without
	// walking them).
	bytes int64
}

// listTail is shared by all versions over one backing array. Positions below
// claimed hold the same elements in every such version.
type listTail struct {
	claimed atomic.Int64

	mu   sync.Mutex
	ids  map[uint64]int32 // hash of a message id → its first position, for items[:idsN]
	idsN int
}

// idSeed seeds the hash of message ids: set once, shared by every index so
// that an index can be inherited by copying its entries.
var idSeed = maphash.MakeSeed()

// idKey is the index's key for a message id. Keys are hashes, not the ids
// themselves, so a list of n messages indexes in about 16n bytes whatever
// its ids' lengths; a lookup confirms its hit against the element.
func idKey(id string) uint64 { return maphash.String(idSeed, id) }

func newList(items []json.RawMessage) *list {
	t := &listTail{}
	t.claimed.Store(int64(len(items)))
	return &list{items: items, tail: t, bytes: itemBytes(items)}
}

// itemBytes is the total length of items.
func itemBytes(items []json.RawMessage) int64 {
	n := int64(0)
	for _, it := range items {
		n += int64(len(it))
	}
	return n
}

// appended returns a new version with elems added at the end.
func (l *list) appended(elems ...json.RawMessage) *list {
	n := len(l.items)
	if n+len(elems) <= cap(l.items) && l.tail.claimed.CompareAndSwap(int64(n), int64(n+len(elems))) {
		items := append(l.items, elems...)
		return &list{items: items, tail: l.tail, bytes: l.bytes + itemBytes(elems)}
	}
	items := cloneItems(l.items, len(elems))
	items = append(items, elems...)
	nl := newList(items)
	nl.tail.inherit(l.tail, n)
	return nl
}

// appendedWithID is appended for one message whose id is known: when the id
// index covers the list, the new position is recorded without parsing.
func (l *list) appendedWithID(elem json.RawMessage, id string) *list {
	nl := l.appended(elem)
	n := len(l.items)
	t := nl.tail
	t.mu.Lock()
	if t.ids != nil && t.idsN == n {
		if k := idKey(id); !hasKey(t.ids, k) {
			t.ids[k] = int32(n)
		}
		t.idsN = n + 1
	}
	t.mu.Unlock()
	return nl
}

// replaced returns a new version with element i set to elem.
func (l *list) replaced(i int, elem json.RawMessage) *list {
	items := cloneItems(l.items, 0)
	items[i] = elem
	nl := newList(items)
	l.tail.mu.Lock()
	indexed := l.tail.ids != nil
	l.tail.mu.Unlock()
	// Positions are unchanged; the index stays right when the id does.
	if !indexed {
		return nl
	}
	if id, ok := messageID(elem); ok {
		if old, had := l.indexOf(id); had && old == i {
			nl.tail.inherit(l.tail, len(items))
		}
	}
	return nl
}

// inherit copies from's id index for the first n positions, which t's
// backing array holds unchanged.
func (t *listTail) inherit(from *listTail, n int) {
	from.mu.Lock()
	defer from.mu.Unlock()
	if from.ids == nil {
		return
	}
	covered := min(from.idsN, n)
	ids := make(map[uint64]int32, covered+covered/2)
	for k, p := range from.ids {
		if int(p) < covered {
			ids[k] = p
		}
	}
	t.mu.Lock()
	t.ids, t.idsN = ids, covered
	t.mu.Unlock()
}

// inserted returns a new version with elem inserted before position i.
func (l *list) inserted(i int, elem json.RawMessage) *list {
	if i == len(l.items) {
		return l.appended(elem)
	}
	items := make([]json.RawMessage, 0, len(l.items)+1+len(l.items)/2)
	items = append(items, l.items[:i]...)
	items = append(items, elem)
	items = append(items, l.items[i:]...)
	return newList(items)
}

// removed returns a new version without element i.
func (l *list) removed(i int) *list {
	items := make([]json.RawMessage, 0, len(l.items)-1+len(l.items)/2)
	items = append(items, l.items[:i]...)
	items = append(items, l.items[i+1:]...)
	return newList(items)
}

// indexOf returns the position of the message with the given id, building
// or extending the shared id index as needed (once per backing array).
func (l *list) indexOf(id string) (int, bool) {
	n := len(l.items)
	t := l.tail
	t.mu.Lock()
	if t.ids == nil {
		t.ids = make(map[uint64]int32, n)
	}
	for ; t.idsN < n; t.idsN++ {
		if mid, ok := messageID(l.items[t.idsN]); ok {
			if k := idKey(mid); !hasKey(t.ids, k) {
				t.ids[k] = int32(t.idsN)
			}
		}
	}
	p, ok := t.ids[idKey(id)]
	t.mu.Unlock()
	if !ok || int(p) >= n {
		return 0, false
	}
	if mid, _ := messageID(l.items[p]); mid == id {
		return int(p), true
	}
	// Two ids share a hash: the index holds the other one's position.
	return l.scanFor(id)
}

// scanFor finds the first message with the given id by reading every
// element: the answer when the index's hash names another message.
func (l *list) scanFor(id string) (int, bool) {
	for i, raw := range l.items {
		if mid, ok := messageID(raw); ok && mid == id {
			return i, true
		}
	}
	return 0, false
}

func hasKey(m map[uint64]int32, k uint64) bool {
	_, ok := m[k]
	return ok
}
