package store

import (
	"container/list"
	"sync"

	"github.com/cairn-dev/cairn/state"
)

// snapCache keeps recently used snapshot states, decoded, up to a byte
// budget (least recently used go first), and the state of the head each
// namespace had when this engine last committed it, so that loading a
// head it wrote replays nothing. A checkpoint's state never changes once
// written, so a cached state is always right; one written by this engine
// is the very document the writer holds, so caching it costs no memory
// while the writer keeps it.
type snapCache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	lru    *list.List // of *snapEntry, most recent first
	byKey  map[snapKey]*list.Element
	// heads: the seq of each namespace's head entry (one at most).
	heads map[headKey]int64
}

type snapKey struct {
	thread, ns string
	seq        int64
}

type snapEntry struct {
	key  snapKey
	doc  state.Doc
	size int64
	// head: kept as its namespace's head, replaced by the next one
	// (a snapshot's entry stays).
	head bool
}

func newSnapCache(budget int64) *snapCache {
	return &snapCache{budget: budget, lru: list.New(), byKey: map[snapKey]*list.Element{}, heads: map[headKey]int64{}}
}

func (c *snapCache) get(k snapKey) (state.Doc, bool) {
	if c == nil {
		return state.Doc{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return state.Doc{}, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*snapEntry).doc, true
}

// put keeps a snapshot's state.
func (c *snapCache) put(k snapKey, d state.Doc, size int64) {
	if c == nil || size > c.budget {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		if e := el.Value.(*snapEntry); e.head {
			e.head = false // a snapshot now: it stays when the head moves on
			delete(c.heads, headKey{k.thread, k.ns})
		}
		c.lru.MoveToFront(el)
		return
	}
	c.add(&snapEntry{key: k, doc: d, size: size})
}

// putHead keeps the state of a namespace's new head row, in place of the
// namespace's previous head (unless that one became a snapshot's).
func (c *snapCache) putHead(k snapKey, d state.Doc, size int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	hk := headKey{k.thread, k.ns}
	if old, ok := c.heads[hk]; ok && old != k.seq {
		c.remove(c.byKey[snapKey{k.thread, k.ns, old}])
	}
	if _, ok := c.byKey[k]; ok || size > c.budget {
		return
	}
	c.add(&snapEntry{key: k, doc: d, size: size, head: true})
	c.heads[hk] = k.seq
}

// add inserts an entry and evicts the least recently used past the
// budget.
func (c *snapCache) add(e *snapEntry) {
	c.byKey[e.key] = c.lru.PushFront(e)
	c.used += e.size
	for c.used > c.budget {
		c.remove(c.lru.Back())
	}
}

// remove drops an entry (nil: nothing).
func (c *snapCache) remove(el *list.Element) {
	if el == nil {
		return
	}
	e := el.Value.(*snapEntry)
	c.lru.Remove(el)
	delete(c.byKey, e.key)
	c.used -= e.size
	if hk := (headKey{e.key.thread, e.key.ns}); e.head && c.heads[hk] == e.key.seq {
		delete(c.heads, hk)
	}
}

// dropThread forgets the snapshots of a thread (deleted or pruned).
func (c *snapCache) dropThread(thread string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, el := range c.byKey {
		if k.thread == thread {
			c.remove(el)
		}
	}
}
