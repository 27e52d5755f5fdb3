package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the driver the store uses

	"github.com/cairn-dev/cairn/store/sqlite"
)

// SQLiteFloor measures the floor of a durable step on SQLite: n
// transactions of one INSERT of a 200-byte row and COMMIT, on the store's
// driver with the store's pragmas (WAL, synchronous NORMAL, or FULL for
// strict durability), in a file of dir. The floor never checkpoints its
// WAL: it is the commit alone, as the store's commits are (the store
// checkpoints in the background). It returns the mean µs per commit.
func SQLiteFloor(ctx context.Context, dir string, durability sqlite.Durability, n int) (float64, error) {
	syncMode := "NORMAL"
	if durability == sqlite.DurabilityStrict {
		syncMode = "FULL"
	}
	path := filepath.Join(dir, "floor.db")
	dsn := (&url.URL{Scheme: "file", Path: path}).String() + "?_pragma=busy_timeout(5000)&_pragma=synchronous(" + syncMode + ")&_pragma=journal_mode(WAL)" +
		"&_pragma=wal_autocheckpoint(0)"
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
	row := []byte(strings.Repeat("x", 200))
	start := time.Now()
	for range n {
		if err := floorCommit(ctx, c, row); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Microseconds()) / float64(n), nil
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
