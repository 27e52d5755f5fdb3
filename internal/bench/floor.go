package bench

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the driver the store uses

	"github.com/cairn-dev/cairn/store/sqlite"
)

// Floor is the cost of the cheapest durable step there is on SQLite, in µs
// per commit: one INSERT of a 200-byte row and COMMIT.
type Floor struct {
	// Plain sends each statement as text (BEGIN, INSERT, COMMIT through
	// database/sql), as a program that writes one row per commit would.
	Plain float64
	// Prepared runs the same three statements prepared once: the lowest
	// cost of a commit on this driver.
	Prepared float64
	// Bounded is Plain with SQLite's own WAL checkpoints at the store's WAL
	// size (wal_autocheckpoint at sqlite.DefaultWALPages): the cheapest
	// program whose WAL stays as bounded as the store's, which Plain's,
	// never copied, does not.
	Bounded float64
}

// SQLiteFloor measures the floor of a durable step on SQLite: n
// transactions of one INSERT of a 200-byte row and COMMIT, on the store's
// driver with the store's pragmas (WAL, synchronous NORMAL, or FULL for
// strict durability), in files of dir, first with statements sent as text,
// then prepared, then as text with SQLite's own checkpoints (Bounded). The floor never checkpoints its WAL: it is the commit
// alone, as the store's commits are (the store checkpoints in the
// background).
func SQLiteFloor(ctx context.Context, dir string, durability sqlite.Durability, n int) (Floor, error) {
	plain, err := floorRun(ctx, filepath.Join(dir, "floor.db"), durability, n, floorCommit, 0)
	if err != nil {
		return Floor{}, err
	}
	prepared, err := floorRun(ctx, filepath.Join(dir, "floor-prepared.db"), durability, n, nil, 0)
	if err != nil {
		return Floor{}, err
	}
	bounded, err := floorRun(ctx, filepath.Join(dir, "floor-bounded.db"), durability, n, floorCommit, sqlite.DefaultWALPages)
	if err != nil {
		return Floor{}, err
	}
	return Floor{Plain: plain, Prepared: prepared, Bounded: bounded}, nil
}

// floorRun times n commits on a new database at path: by commit when set,
// else by the three statements prepared once; walPages is its
// wal_autocheckpoint (0: never).
func floorRun(ctx context.Context, path string, durability sqlite.Durability, n int, commit func(context.Context, *sql.Conn, []byte) error, walPages int) (float64, error) {
	syncMode := "NORMAL"
	if durability == sqlite.DurabilityStrict {
		syncMode = "FULL"
	}
	dsn := sqlite.FileURI(path) + "?_pragma=busy_timeout(5000)&_pragma=synchronous(" + syncMode + ")&_pragma=journal_mode(WAL)" +
		"&_pragma=wal_autocheckpoint(" + strconv.Itoa(walPages) + ")"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return 0, fmt.Errorf("bench: floor: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	c, err := db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("bench: floor: %w", err)
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `CREATE TABLE floor (id INTEGER PRIMARY KEY, data BLOB NOT NULL)`); err != nil {
		return 0, fmt.Errorf("bench: floor: %w", err)
	}
	if commit == nil {
		if commit, err = preparedCommit(ctx, c); err != nil {
			return 0, err
		}
	}
	row := []byte(strings.Repeat("x", 200))
	start := time.Now()
	for range n {
		if err := commit(ctx, c, row); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Microseconds()) / float64(n), nil
}

// preparedCommit prepares BEGIN, the INSERT and COMMIT on c and returns a
// commit that runs them.
func preparedCommit(ctx context.Context, c *sql.Conn) (func(context.Context, *sql.Conn, []byte) error, error) {
	var sts [3]*sql.Stmt
	for i, q := range []string{`BEGIN`, `INSERT INTO floor (data) VALUES (?)`, `COMMIT`} {
		st, err := c.PrepareContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("bench: floor: %w", err)
		}
		sts[i] = st
	}
	return func(ctx context.Context, _ *sql.Conn, row []byte) error {
		args := [][]any{nil, {row}, nil}
		for i, st := range sts {
			if _, err := st.ExecContext(ctx, args[i]...); err != nil {
				return fmt.Errorf("bench: floor: %w", err)
			}
		}
		return nil
	}, nil
}

func floorCommit(ctx context.Context, c *sql.Conn, row []byte) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("bench: floor: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO floor (data) VALUES (?)`, row); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("bench: floor: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("bench: floor: %w", err)
	}
	return nil
}
