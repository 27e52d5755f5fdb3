package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// wrap says what failed and classifies it: an unreachable server is
// store.ErrUnavailable, damage store.ErrCorrupt. An error already
// classified (a store error, or one wrap made) comes back as it is.
func wrap(err error, what, thread string) error {
	if err == nil {
		return nil
	}
	if classified(err) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "XX001" || pe.Code == "XX002") { // data_corrupted, index_corrupted
		return &store.CorruptError{Thread: thread, What: "database (" + what + ")", Err: err}
	}
	if unavailable(err) {
		return fmt.Errorf("%w: postgres: %s of thread %q: %w", store.ErrUnavailable, what, thread, err)
	}
	return fmt.Errorf("store: postgres: %s of thread %q: %w", what, thread, err)
}

// storeErrors are the store's errors wrap leaves as they are.
var storeErrors = []error{store.ErrConflict, store.ErrNotFound, store.ErrUnavailable, store.ErrInvalidArgument, store.ErrInvalidID,
	store.ErrCorrupt, store.ErrClosed, store.ErrReadOnly, store.ErrFenced, store.ErrLeaseHeld, store.ErrUnsupportedFormat,
	store.ErrMigrationNeeded, context.Canceled, context.DeadlineExceeded}

// classified reports whether err is one of storeErrors already.
func classified(err error) bool {
	for _, e := range storeErrors {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// fencedOr is the error of a fenced row r that was refused with
// conflict: ErrFenced when its lease has another token now (a worker
// took the thread over and wrote it), the conflict when it still has
// r's, and ErrUnavailable when the lease cannot be read — which of the
// two happened is then unknown, and the writer tries again once the
// server is back (a stale head it would then see as a conflict, a
// takeover as fenced).
func (b *Backend) fencedOr(ctx context.Context, r driver.Row, conflict error) error {
	if r.Fence == 0 {
		return conflict
	}
	cur, err := b.Lease(ctx, r.Thread)
	switch {
	case err != nil:
		return wrap(err, "lease", r.Thread)
	case cur.Token != r.Fence:
		return driver.FencedError(r.Thread, r.Fence, cur.Token)
	}
	return conflict
}

// inTx runs fn in a transaction; what failed — beginning or committing
// it included (a server that cannot be reached fails the BEGIN) — is
// wrapped as wrap does.
func (b *Backend) inTx(ctx context.Context, what, thread string, fn func(pgx.Tx) error) error {
	return wrap(pgx.BeginFunc(ctx, b.pool, fn), what, thread)
}

// unavailable reports whether err says the server could not be reached or
// went away, rather than refused the statement.
func unavailable(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) || errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// connection_exception (08…), admin_shutdown, crash_shutdown,
		// cannot_connect_now.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	return false
}
