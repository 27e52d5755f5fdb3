package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cairn-dev/cairn/store"
)

// Stats counts the writer's work.
type Stats struct {
	// Jobs is the number of writes (appends, thread changes) committed or
	// refused; Transactions the number of transactions they ran in.
	Jobs, Transactions int64
	// WAL counts the background copies of the WAL into the database
	// (SQLite's WAL checkpoints; not Cairn's checkpoints).
	WAL WALStats
}

// Stats returns the writer's counters.
func (b *Backend) Stats() Stats {
	b.wmu.Lock()
	st := b.stats
	b.wmu.Unlock()
	if b.ckpt != nil {
		st.WAL = b.ckpt.snapshot()
	}
	return st
}

// job is one unit of work for the writer. Its fn runs inside the batch
// transaction; expected failures (a conflict) leave the others committed.
type job struct {
	ctx   context.Context
	fn    func(ctx context.Context, tx *sql.Conn) error
	done  chan error
	pages int // the WAL pages it is expected to write
}

// errLead is sent to a queued job's owner to make it the next leader.
var errLead = errors.New("lead")

// run executes a batch in one transaction and answers every job.
func (b *Backend) run(batch []*job) {
	ctx := context.Background()
	errs := make([]error, len(batch))
	fail := func(err error) {
		for _, j := range batch {
			j.done <- err
		}
	}
	if _, err := b.begin.ExecContext(ctx); err != nil {
		fail(b.writeErr("begin", err))
		return
	}
	for i, j := range batch {
		if err := j.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		err := j.fn(ctx, b.conn)
		if err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
			_, _ = b.rollback.ExecContext(ctx)
			if !errors.Is(err, store.ErrInvalidArgument) {
				err = b.writeErr("write", err)
			}
			fail(err)
			return
		}
		errs[i] = err
	}
	if _, err := b.commit.ExecContext(ctx); err != nil {
		_, _ = b.rollback.ExecContext(ctx)
		fail(b.writeErr("commit", err))
		return
	}
	b.wmu.Lock()
	b.stats.Jobs += int64(len(batch))
	b.stats.Transactions++
	for _, j := range batch {
		b.walPages += j.pages
	}
	full := b.walPages >= b.walLimit
	if full {
		b.walPages = 0
	}
	b.wmu.Unlock()
	if full {
		b.ckpt.poke()
	}
	b.ckpt.finishUp(ctx, b.conn)
	if len(batch) > 1 && b.log.Enabled(ctx, slog.LevelDebug) {
		b.log.Debug("group commit", "path", b.path, "jobs", len(batch))
	}
	for i, j := range batch {
		j.done <- errs[i]
	}
}

// do queues fn and returns when its transaction has committed (or failed).
// The caller that finds nobody leading becomes the leader: it runs the queue
// in batches, in its own goroutine, until its own job is done, then hands
// the lead to the oldest waiting caller. Commits that arrive while a batch
// runs are grouped into the next one.
func (b *Backend) do(ctx context.Context, fn func(ctx context.Context, c *sql.Conn) error) error {
	return b.doSized(ctx, 0, fn)
}

// doSized is do for a job that writes about bytes of blobs.
func (b *Backend) doSized(ctx context.Context, bytes int, fn func(ctx context.Context, c *sql.Conn) error) error {
	if b.readOnly {
		return fmt.Errorf("%w: %s", store.ErrReadOnly, b.path)
	}
	j := &job{ctx: ctx, fn: fn, done: make(chan error, 1), pages: walEstimate(bytes)}
	b.wmu.Lock()
	if b.closed {
		b.wmu.Unlock()
		return store.ErrClosed
	}
	b.queue = append(b.queue, j)
	if b.leading {
		b.wmu.Unlock()
		// Once queued the job runs: a caller that stops waiting could not
		// tell whether it committed, so it waits for the answer.
		if err := <-j.done; err != errLead {
			return err
		}
		b.wmu.Lock()
	} else {
		b.leading = true
	}
	// Lead: run batches until our own job has an answer.
	for {
		n := min(len(b.queue), b.maxBatch)
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.wmu.Unlock()
		b.run(batch)
		b.wmu.Lock()
		select {
		case err := <-j.done:
			if len(b.queue) > 0 {
				b.queue[0].done <- errLead
			} else {
				b.leading = false
				b.idle.Broadcast()
			}
			b.wmu.Unlock()
			return err
		default:
		}
	}
}

// savepoint runs fn so that its statements commit together or not at all.
func savepoint(ctx context.Context, c *sql.Conn, fn func() error) error {
	if _, err := c.ExecContext(ctx, "SAVEPOINT job"); err != nil {
		return err
	}
	if err := fn(); err != nil {
		_, _ = c.ExecContext(ctx, "ROLLBACK TO job")
		_, _ = c.ExecContext(ctx, "RELEASE job")
		return err
	}
	_, err := c.ExecContext(ctx, "RELEASE job")
	return err
}
