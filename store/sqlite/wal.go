package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// walCopier copies the WAL into the database in the background, on a
// connection of its own, so that no commit waits for the copy: the writer
// runs with wal_autocheckpoint off and nudges the walCopier once it has
// written about WALPages pages since the last nudge. The checkpoint is
// PASSIVE: it copies what is committed without waiting for readers or the
// writer. The WAL can only start again from its beginning once every frame
// is copied, which a writer that keeps committing never lets a background
// copy see; so when a copy ends, the writer copies the few frames it added
// meanwhile itself, between two transactions (finishUp), and its next
// transaction restarts the WAL, truncated to journal_size_limit.
type walCopier struct {
	db    *sql.DB
	log   *slog.Logger
	path  string
	nudge chan struct{}
	stop  chan struct{}
	wg    sync.WaitGroup
	// copied: a background copy ended since the writer last finished up.
	copied atomic.Bool

	mu    sync.Mutex
	stats WALStats
}

// WALStats counts the background WAL copies (SQLite checkpoints).
type WALStats struct {
	// Runs is the number of background checkpoints run; Frames the WAL
	// frames they copied into the database; Failed the checkpoints that
	// returned an error (logged, and retried at the next nudge); Finishes
	// the writer's own checkpoints of the frames added during a copy.
	Runs, Frames, Failed, Finishes int64
}

func startWALCopier(dsn, path string, log *slog.Logger) (*walCopier, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s for checkpoints: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxLifetime(0)
	c := &walCopier{db: db, log: log, path: path, nudge: make(chan struct{}, 1), stop: make(chan struct{})}
	c.wg.Add(1)
	go c.loop()
	return c, nil
}

// startWALCopies starts b's walCopier on a connection opened with
// dsn. A WAL left larger than b's limit by a process that stopped without
// checkpointing (killed, or never writing enough to nudge) is copied at
// once: the writer counts only its own pages.
func (b *Backend) startWALCopies(dsn string) error {
	var err error
	if b.ckpt, err = startWALCopier(dsn, b.path, b.log); err != nil {
		return err
	}
	if _, wal := b.Sizes(); wal > int64(b.walLimit)*4096 {
		b.ckpt.poke()
	}
	return nil
}

// poke asks for a checkpoint; it never blocks the writer.
func (c *walCopier) poke() {
	if c == nil {
		return
	}
	select {
	case c.nudge <- struct{}{}:
	default: // one is already asked for
	}
}

func (c *walCopier) loop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.stop:
			return
		case <-c.nudge:
			c.run()
		}
	}
}

// run runs one PASSIVE checkpoint.
func (c *walCopier) run() {
	var busy, logFrames, copied int64
	err := c.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logFrames, &copied)
	if isBusy(err) {
		return // another process checkpoints: the next nudge tries again
	}
	c.mu.Lock()
	c.stats.Runs++
	if err != nil {
		c.stats.Failed++
	} else {
		c.stats.Frames += max(copied, 0)
	}
	c.mu.Unlock()
	if err != nil {
		c.log.Warn("background WAL checkpoint failed; retried at the next", "path", c.path, "err", err)
		return
	}
	c.copied.Store(true)
}

// finishUp runs, on the writer's connection between two transactions, the
// checkpoint that lets the WAL restart, when a background copy has ended
// since the last one: it copies only the frames committed during that copy.
func (c *walCopier) finishUp(ctx context.Context, conn *sql.Conn) {
	if c == nil || !c.copied.CompareAndSwap(true, false) {
		return
	}
	var busy, logFrames, copied int64
	err := conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logFrames, &copied)
	if busy != 0 || isBusy(err) {
		// Another checkpoint runs (this process's, or another's): the
		// next commit tries again.
		c.copied.Store(true)
		return
	}
	c.mu.Lock()
	c.stats.Finishes++
	if err != nil {
		c.stats.Failed++
	}
	c.mu.Unlock()
	if err != nil {
		c.log.Warn("WAL checkpoint failed; retried after the next background copy", "path", c.path, "err", err)
	}
}

// close stops the loop and closes the connection.
func (c *walCopier) close() error {
	close(c.stop)
	c.wg.Wait()
	return c.db.Close()
}

func (c *walCopier) snapshot() WALStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// walEstimate is the writer's count of the pages it wrote to the WAL since
// it last nudged the walCopier: a job is counted as two pages (a leaf
// and, now and then, a split) plus its blobs' bytes in pages.
func walEstimate(bytes int) int { return 2 + bytes/4096 }
