package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cairn-dev/cairn/store"
)

// The hooks below let a package beside the backend (store/postgres/pgqueue,
// the run queue over River) write in the backend's own transactions, so
// that this package links no queue.

// Pool is the backend's connection pool (for River's workers).
func (b *Backend) Pool() *pgxpool.Pool { return b.pool }

// RunTx runs fn in one transaction of the backend's pool: what fn writes
// commits together, or not at all. It fails with store.ErrReadOnly on a
// read-only backend, without starting one; an error (beginning or
// committing included) is classified as the backend's own are
// (store.ErrUnavailable, store.ErrCorrupt, …), what and thread naming it.
func (b *Backend) RunTx(ctx context.Context, what, thread string, fn func(pgx.Tx) error) error {
	if err := b.writable(); err != nil {
		return err
	}
	return b.inTx(ctx, what, thread, fn)
}

// PutRunTx writes a run record in tx as store.RunLog's PutRun does (the
// record replaces the one of its id): with RunTx, a run's record and the
// work queued for it commit together.
func PutRunTx(ctx context.Context, tx pgx.Tx, r store.RunRecord) error {
	return putRun(ctx, tx, r)
}

// WrapError classifies an error of a statement run on the backend's pool
// as the backend's own are: an unreachable server is store.ErrUnavailable,
// damage store.ErrCorrupt; what and thread say what failed. An error
// already classified comes back as it is, and nil as nil.
func WrapError(err error, what, thread string) error { return wrap(err, what, thread) }
