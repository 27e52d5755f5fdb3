package flow

import (
	"context"
	"sync"

	"github.com/cairn-dev/cairn/store"
)

// committer appends checkpoints in order in the background (async
// durability). The first failure stops it; later puts are dropped and the
// error is reported by flush and close.
type committer struct {
	ctx  context.Context
	s    store.Store
	mu   sync.Mutex
	cond *sync.Cond
	q    []store.Checkpoint
	busy bool
	err  error
	done bool
}

func newCommitter(ctx context.Context, s store.Store) *committer {
	c := &committer{ctx: context.WithoutCancel(ctx), s: s}
	c.cond = sync.NewCond(&c.mu)
	go c.loop()
	return c
}

func (c *committer) put(cp store.Checkpoint) {
	c.mu.Lock()
	if c.err == nil {
		c.q = append(c.q, cp)
		c.cond.Broadcast()
	}
	c.mu.Unlock()
}

func (c *committer) loop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.q) == 0 && !c.done {
			c.cond.Wait()
		}
		if len(c.q) == 0 && c.done {
			c.cond.Broadcast()
			return
		}
		cp := c.q[0]
		c.q = c.q[1:]
		c.busy = true
		c.mu.Unlock()
		_, err := c.s.Append(c.ctx, cp)
		c.mu.Lock()
		c.busy = false
		if err != nil && c.err == nil {
			c.err = err
			c.q = nil
		}
		c.cond.Broadcast()
	}
}

// flush waits until everything put so far is committed.
func (c *committer) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.q) > 0 || c.busy {
		c.cond.Wait()
	}
	return c.err
}

// close flushes and stops the committer.
func (c *committer) close() error {
	err := c.flush()
	c.mu.Lock()
	c.done = true
	c.cond.Broadcast()
	c.mu.Unlock()
	return err
}
