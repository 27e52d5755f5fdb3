package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/store"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

func isBusy(err error) bool {
	switch sqliteCode(err) & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

func (b *Backend) wrapOpen(err error) error {
	if errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrNotStore) || errors.Is(err, store.ErrUnsupportedFormat) || errors.Is(err, store.ErrNotFound) {
		return err
	}
	if isCorrupt(err) {
		return fmt.Errorf("%w: %s is not a readable Cairn database: %v", store.ErrCorrupt, b.path, err)
	}
	if t := b.damage(err); t != nil {
		return t
	}
	return fmt.Errorf("store: open %s: %w", b.path, err)
}

func sqliteCode(err error) int {
	if err == nil {
		return 0 // errors.As would allocate its target
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// isCorrupt reports errors that mean the file is damaged: SQLite's corrupt
// and not-a-database codes, and a short read (the file was truncated).
func isCorrupt(err error) bool {
	code := sqliteCode(err)
	switch code & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return code == sqlite3.SQLITE_IOERR_SHORT_READ
}

func isConstraint(err error) bool { return sqliteCode(err)&0xff == sqlite3.SQLITE_CONSTRAINT }

// damage explains a generic SQLite error (SQLITE_ERROR, which is also what
// a dropped table gives) when one of the store's tables is missing; nil
// otherwise.
func (b *Backend) damage(err error) error {
	if sqliteCode(err)&0xff != sqlite3.SQLITE_ERROR {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := b.conn // while opening, before the read pool exists
	if b.read != nil {
		var cerr error
		if c, cerr = b.read.Conn(ctx); cerr != nil {
			return nil
		}
		defer c.Close()
	}
	if c == nil {
		return nil
	}
	have, terr := tableNames(ctx, c)
	if terr != nil {
		return nil
	}
	for _, name := range tables {
		if !have[name] {
			return b.missingTable(name)
		}
	}
	for _, name := range laneTables {
		if !b.noLanes && !have[name] {
			return b.missingTable(name)
		}
	}
	return nil
}

// readErr maps a read failure to the store's typed errors.
func (b *Backend) readErr(err error, thread, ns string, seq int64, what string) error {
	if err == nil {
		return nil
	}
	if isCorrupt(err) {
		return &store.CorruptError{Thread: thread, Namespace: ns, Seq: seq, What: "database (" + what + ")", Err: fmt.Errorf("%s: %w", b.path, err)}
	}
	if d := b.damage(err); d != nil {
		return d
	}
	return fmt.Errorf("store: %s of thread %q: %w", what, thread, err)
}

// writeErr maps a failed write transaction to the store's typed errors.
func (b *Backend) writeErr(what string, err error) error {
	if isCorrupt(err) {
		return fmt.Errorf("%w: %s: %s: %v", store.ErrCorrupt, b.path, what, err)
	}
	if d := b.damage(err); d != nil {
		return d
	}
	return fmt.Errorf("store: %s: %w", what, err)
}
