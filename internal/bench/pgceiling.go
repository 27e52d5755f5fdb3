package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// PGCeiling measures the server's own ceiling for single-row transactions:
// clients connections each commit one INSERT of a 200-byte row at a time,
// for d, into a table of their own (dropped afterwards). It returns
// transactions a second and the clients used (at most the server's
// max_connections less 10).
func PGCeiling(ctx context.Context, dsn string, clients int, d time.Duration) (float64, int, error) {
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, 0, fmt.Errorf("bench: ceiling: %w", err)
	}
	defer admin.Close(context.Background())
	var maxConns int
	if err := admin.QueryRow(ctx, `SELECT current_setting('max_connections')::int`).Scan(&maxConns); err != nil {
		return 0, 0, fmt.Errorf("bench: ceiling: %w", err)
	}
	clients = max(1, min(clients, maxConns-10))
	if _, err := admin.Exec(ctx, `CREATE TABLE IF NOT EXISTS cairn_bench_ceiling (id bigserial PRIMARY KEY, data bytea NOT NULL)`); err != nil {
		return 0, 0, fmt.Errorf("bench: ceiling: %w", err)
	}
	defer admin.Exec(context.Background(), `DROP TABLE IF EXISTS cairn_bench_ceiling`)
	conns := make([]*pgx.Conn, clients)
	for i := range conns {
		if conns[i], err = pgx.Connect(ctx, dsn); err != nil {
			return 0, 0, fmt.Errorf("bench: ceiling: %w", err)
		}
		defer conns[i].Close(context.Background())
	}
	row := make([]byte, 200)
	var done atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	deadline := start.Add(d)
	for _, c := range conns {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if _, err := c.Exec(ctx, `INSERT INTO cairn_bench_ceiling (data) VALUES ($1)`, row); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return 0, 0, fmt.Errorf("bench: ceiling: %w", err)
	}
	return float64(done.Load()) / time.Since(start).Seconds(), clients, nil
}
