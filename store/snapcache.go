package store

import (
	"container/list"
	"sync"

	"github.com/cairn-dev/cairn/state"
)

// snapCache keeps recently used snapshot states, decoded, up to a byte
// budget (least recently used go first). Snapshots never change once
// written, so a cached state is always right; one written by this engine is
// the very document the writer holds, so caching it costs no memory while
// the writer keeps it.
type snapCache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	lru    *list.List // of *snapEntry, most recent first
	byKey  map[snapKey]*list.Element
}

type snapKey struct {
	thread, ns string
	seq        int64
}

type snapEntry struct {
	key  snapKey
	doc  state.Doc
	size int64
}

func newSnapCache(budget int64) *snapCache {
	return &snapCache{budget: budget, lru: list.New(), byKey: map[snapKey]*list.Element{}}
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

func (c *snapCache) put(k snapKey, d state.Doc, size int64) {
	if c == nil || size > c.budget {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.lru.MoveToFront(el)
		return
	}
	c.byKey[k] = c.lru.PushFront(&snapEntry{key: k, doc: d, size: size})
	c.used += size
	for c.used > c.budget {
		last := c.lru.Back()
		e := last.Value.(*snapEntry)
		c.lru.Remove(last)
		delete(c.byKey, e.key)
		c.used -= e.size
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
			c.used -= el.Value.(*snapEntry).size
			c.lru.Remove(el)
			delete(c.byKey, k)
		}
	}
}
