package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// Group commit: appends that arrive while others are committing wait and
// go together, one transaction (one WAL flush) for many rows. Every
// statement of a batch is written so that a conflict is a row count, not
// an error (ON CONFLICT DO NOTHING, a parent check in the INSERT), so one
// stale append is refused alone and the others of its batch commit. A
// batch that fails as a whole for a server-side reason (a deadlock between
// two stale writers, say) is retried row by row in transactions of their
// own.

// insertJob is one append waiting for its batch.
type insertJob struct {
	row  driver.Row
	done chan error
}

// grouper runs the batches: up to lanes at once, each lane a goroutine
// that commits batches until the queue is empty.
type grouper struct {
	b        *Backend
	maxBatch int
	mu       sync.Mutex
	queue    []*insertJob
	running  int // lanes at work
	lanes    int
	log      *slog.Logger
	stats    GroupStats
}

// GroupStats counts what group commit did.
type GroupStats struct {
	Rows, Transactions, Fallbacks int64
}

// insert queues a row and returns its outcome, once its batch has
// committed. Once queued the row is written: a caller could not tell
// whether it committed had it stopped waiting, so it waits for the answer.
func (g *grouper) insert(r driver.Row) error {
	g.mu.Lock()
	if g.running == 0 && len(g.queue) == 0 {
		// Alone: the plain single-row transaction, in the caller's
		// goroutine; appends that arrive meanwhile queue behind it.
		g.running++
		g.mu.Unlock()
		err := g.b.insertOne(context.Background(), r)
		g.mu.Lock()
		g.running--
		g.kick()
		g.mu.Unlock()
		return err
	}
	j := &insertJob{row: r, done: make(chan error, 1)}
	g.queue = append(g.queue, j)
	g.kick()
	g.mu.Unlock()
	return <-j.done
}

// kick starts lanes for the queue while lanes are free (g.mu held).
func (g *grouper) kick() {
	for g.running < g.lanes && len(g.queue) > 0 {
		g.running++
		go g.lane(g.take())
	}
}

// take removes the next batch from the queue (g.mu held).
func (g *grouper) take() []*insertJob {
	n := min(len(g.queue), g.maxBatch)
	batch := g.queue[:n:n]
	g.queue = g.queue[n:]
	return batch
}

// lane commits batches until the queue is empty.
func (g *grouper) lane(batch []*insertJob) {
	for {
		g.run(batch)
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		batch = g.take()
		g.mu.Unlock()
	}
}

// run commits a batch and answers every job in it.
func (g *grouper) run(batch []*insertJob) {
	if len(batch) == 1 {
		batch[0].done <- g.b.insertOne(context.Background(), batch[0].row)
		return
	}
	errs, err := g.commit(batch)
	var pe *pgconn.PgError
	switch {
	case err == nil:
		for i, j := range batch {
			j.done <- errs[i]
		}
	case errors.As(err, &pe) && len(batch) > 1:
		g.fallback(batch)
	default:
		for _, j := range batch {
			j.done <- err
		}
	}
}

// fallback writes each row of a failed batch in its own transaction.
func (g *grouper) fallback(batch []*insertJob) {
	g.mu.Lock()
	g.stats.Fallbacks++
	g.mu.Unlock()
	for _, j := range batch {
		j.done <- g.b.insertOne(context.Background(), j.row)
	}
}

// commit writes a batch in one transaction: one round trip for every
// statement, then COMMIT. Checkpoints go in one multi-row INSERT per
// level (a row whose parent is in the batch goes in the level after its
// parent's, so it sees it). It returns each row's outcome (nil or
// ErrConflict), or the error that failed the transaction.
func (g *grouper) commit(batch []*insertJob) ([]error, error) {
	ctx := context.Background()
	rows := make([]driver.Row, len(batch))
	for i, j := range batch {
		rows[i] = j.row
	}
	levels := levelsOf(rows)
	errs := make([]error, len(batch))
	err := pgx.BeginFunc(ctx, g.b.pool, func(tx pgx.Tx) error {
		pb := &pgx.Batch{}
		for _, r := range rows {
			if err := queueThread(pb, r); err != nil {
				return err
			}
		}
		for _, lv := range levels {
			queueCheckpoints(pb, rows, lv)
		}
		for _, r := range rows {
			queueSnapshot(pb, r)
		}
		for _, r := range rows {
			queueWrites(pb, r)
		}
		for _, r := range rows {
			queueHead(pb, r)
		}
		res := tx.SendBatch(ctx, pb)
		if err := readBatch(res, rows, levels, errs); err != nil {
			res.Close()
			return err
		}
		return res.Close()
	})
	if err != nil {
		return nil, wrap(err, "group commit", "")
	}
	for i, r := range rows {
		if errs[i] != nil && !errors.Is(errs[i], store.ErrFenced) {
			errs[i] = g.b.fencedOr(ctx, r, errs[i])
		}
	}
	g.mu.Lock()
	g.stats.Rows += int64(len(batch))
	g.stats.Transactions++
	g.mu.Unlock()
	if len(batch) > 1 && g.log.Enabled(ctx, slog.LevelDebug) {
		g.log.Debug("group commit", "rows", len(batch), "levels", len(levels))
	}
	return errs, nil
}

type rowKey struct {
	thread, ns string
	seq        int64
}

// writtenKey is a stored row's key and checksum.
type writtenKey struct {
	rowKey
	sum int64
}

// levelsOf splits a batch's row indexes into levels: a row whose parent
// is an earlier row of the batch goes one level after it.
func levelsOf(rows []driver.Row) [][]int {
	at := map[rowKey]int{}
	level := make([]int, len(rows))
	var out [][]int
	for i, r := range rows {
		if p, ok := at[rowKey{r.Thread, r.Namespace, r.Parent}]; ok && r.Parent > 0 {
			level[i] = level[p] + 1
		}
		at[rowKey{r.Thread, r.Namespace, r.Seq}] = i
		for len(out) <= level[i] {
			out = append(out, nil)
		}
		out[level[i]] = append(out[level[i]], i)
	}
	return out
}

// queueThread adds the INSERT of a row's new thread (with its index).
func queueThread(pb *pgx.Batch, r driver.Row) error {
	if r.Create != nil && r.Seq == 1 {
		args, err := createArgs(r.Create)
		if err != nil {
			return err
		}
		pb.Queue(createThreadSQL, args...)
	}
	return nil
}

// queueCheckpoints adds one INSERT of the checkpoints of a level: each
// written if its parent exists and its seq is free (and, for a new thread,
// if the thread is the one its row created); RETURNING says which were.
func queueCheckpoints(pb *pgx.Batch, rows []driver.Row, lv []int) {
	n := len(lv)
	var (
		thread, ns                                          = make([]string, n), make([]string, n)
		seq, parent, base, since, baseSize, createdAt, sums = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		status                                              = make([]int16, n)
		hasSnap                                             = make([]bool, n)
		meta, patch                                         = make([][]byte, n), make([][]byte, n)
		threadSum                                           = make([]*int64, n)
		fences                                              = make([]int64, n)
		extIDs                                              = make([]*string, n)
	)
	for k, i := range lv {
		r := rows[i]
		thread[k], ns[k], seq[k], parent[k], base[k], since[k], baseSize[k] = r.Thread, r.Namespace, r.Seq, r.Parent, r.Base, r.Since, r.BaseSize
		status[k], createdAt[k], hasSnap[k], meta[k], patch[k], sums[k] = int16(r.Status), r.CreatedAt, r.HasSnapshot, r.Meta, r.Patch, int64(r.Sum)
		if r.NewThread && r.Create != nil {
			v := int64(r.Create.Sum)
			threadSum[k] = &v
		}
		fences[k] = r.Fence
		if r.ExternalID != "" {
			extIDs[k] = &r.ExternalID
		}
	}
	pb.Queue(`INSERT INTO cairn_checkpoints (thread, ns, seq, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch, crc, ext_id)
		SELECT r.thread, r.ns, r.seq, r.parent, r.base, r.since, r.base_size, r.status, r.created_at, r.has_snapshot, r.meta, r.patch, r.crc, r.ext_id
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::smallint[], $9::bigint[], $10::boolean[], $11::bytea[], $12::bytea[], $13::bigint[], $14::bigint[], $15::bigint[], $16::text[])
			AS r(thread, ns, seq, parent, base, since, base_size, status, created_at, has_snapshot, meta, patch, crc, tsum, fence, ext_id)
		WHERE (r.parent = 0 OR EXISTS (SELECT 1 FROM cairn_checkpoints c WHERE c.thread = r.thread AND c.ns = r.ns AND c.seq = r.parent
			AND (c.base = r.base OR r.base IN (r.seq, r.parent)) FOR KEY SHARE))
		AND (r.tsum IS NULL OR EXISTS (SELECT 1 FROM cairn_threads t WHERE t.id = r.thread AND t.crc = r.tsum))
		AND (r.fence = 0 OR EXISTS (SELECT 1 FROM cairn_leases l WHERE l.thread = r.thread AND l.token = r.fence FOR SHARE))
		ON CONFLICT DO NOTHING
		RETURNING thread, ns, seq, crc`,
		thread, ns, seq, parent, base, since, baseSize, status, createdAt, hasSnap, meta, patch, sums, threadSum, fences, extIDs)
}

// queueSnapshot adds a row's snapshot, written if the checkpoint is this
// row's (its checksum).
func queueSnapshot(pb *pgx.Batch, r driver.Row) {
	if r.HasSnapshot {
		pb.Queue(`INSERT INTO cairn_snapshots (thread, ns, seq, data)
			SELECT $1::text, $2::text, $3::bigint, $4::bytea
			WHERE EXISTS (SELECT 1 FROM cairn_checkpoints WHERE thread = $1::text AND ns = $2::text AND seq = $3::bigint AND crc = $5::bigint)
			ON CONFLICT (thread, ns, seq) DO UPDATE SET data = EXCLUDED.data`, r.Thread, r.Namespace, r.Seq, r.Snapshot, int64(r.Sum))
	}
}

// queueWrites adds the pending writes a row carries (driver.Row.Writes),
// written if the checkpoint is this row's (its checksum); it reports
// whether it queued a statement.
func queueWrites(pb *pgx.Batch, r driver.Row) bool {
	if len(r.Writes) == 0 {
		return false
	}
	tasks, nodes, data := make([]string, len(r.Writes)), make([]string, len(r.Writes)), make([][]byte, len(r.Writes))
	for i, w := range r.Writes {
		tasks[i], nodes[i], data[i] = w.Task, w.Node, w.Update
	}
	pb.Queue(`INSERT INTO cairn_writes (thread, ns, seq, task, node, data)
		SELECT $1::text, $2::text, $3::bigint, w.task, w.node, w.data FROM unnest($4::text[], $5::text[], $6::bytea[]) AS w(task, node, data)
		WHERE EXISTS (SELECT 1 FROM cairn_checkpoints WHERE thread = $1::text AND ns = $2::text AND seq = $7::bigint AND crc = $8::bigint)
		ON CONFLICT (thread, ns, seq, task) DO UPDATE SET node = EXCLUDED.node, data = EXCLUDED.data`,
		r.Thread, r.Namespace, r.WritesAt, tasks, nodes, data, r.Seq, int64(r.Sum))
	return true
}

// readBatch reads the batch's results in the order they were queued and
// sets each row's outcome: nil, or ErrConflict. It returns the error that
// fails the transaction.
func readBatch(res pgx.BatchResults, rows []driver.Row, levels [][]int, errs []error) error {
	for i, r := range rows {
		if r.Create == nil || r.Seq != 1 {
			continue
		}
		tag, err := res.Exec()
		if err != nil {
			return wrap(err, "insert", r.Thread)
		}
		if r.NewThread && tag.RowsAffected() == 0 {
			errs[i] = fmt.Errorf("%w: thread %q exists", store.ErrConflict, r.Thread)
		}
	}
	for _, lv := range levels {
		// A row was written if its key and checksum came back: two rows of
		// one batch may share a key (writers racing on one head), and only
		// the one stored won.
		written := map[writtenKey]bool{}
		got, err := res.Query()
		if err != nil {
			return wrap(err, "insert", "")
		}
		for got.Next() {
			var k writtenKey
			if err := got.Scan(&k.thread, &k.ns, &k.seq, &k.sum); err != nil {
				got.Close()
				return wrap(err, "insert", "")
			}
			written[k] = true
		}
		got.Close()
		if err := got.Err(); err != nil {
			return wrap(err, "insert", "")
		}
		for _, i := range lv {
			r := rows[i]
			if !written[writtenKey{rowKey{r.Thread, r.Namespace, r.Seq}, int64(r.Sum)}] && errs[i] == nil {
				errs[i] = fmt.Errorf("%w: thread %q namespace %q: checkpoint %d exists, or its parent %d does not (another writer moved the head)", store.ErrConflict, r.Thread, r.Namespace, r.Seq, r.Parent)
			}
		}
	}
	for _, r := range rows {
		if r.HasSnapshot {
			if _, err := res.Exec(); err != nil {
				return wrap(err, "insert snapshot", r.Thread)
			}
		}
	}
	for _, r := range rows {
		if len(r.Writes) > 0 {
			if _, err := res.Exec(); err != nil {
				return wrap(err, "pending writes", r.Thread)
			}
		}
	}
	for _, r := range rows {
		if r.Head != nil && r.Namespace == "" {
			if _, err := res.Exec(); err != nil {
				return wrap(err, "thread head", r.Thread)
			}
		}
	}
	return nil
}
