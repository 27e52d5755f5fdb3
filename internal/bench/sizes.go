package bench

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// TableBytes is what one table of the store holds, its indexes included.
type TableBytes struct {
	Table string `json:"table"`
	// Kind is "checkpoints" (the checkpoint rows and their snapshots) or
	// "other" (everything else the server keeps: threads, run records,
	// run event logs, writes, leases…).
	Kind  string `json:"kind"`
	Bytes int64  `json:"bytes"`
	// Added is what the workload added (Bytes less the table's bytes
	// before it started).
	Added int64 `json:"added_bytes"`
}

// StoreBytes is what a workload left in the store, read from the
// database after its server stopped.
type StoreBytes struct {
	// Method is how the tables were measured: "dbstat" (SQLite's pages of
	// each table and index), "column sums" (SQLite without dbstat: the
	// bytes of every column, no page overhead) or
	// "pg_total_relation_size" (PostgreSQL: heap, indexes and TOAST of
	// each table in the store's schema).
	Method string `json:"method"`
	// DatabaseBytes is the SQLite file (and WAL, if any) or, on
	// PostgreSQL, the whole database (pg_database_size).
	DatabaseBytes int64        `json:"database_bytes"`
	Tables        []TableBytes `json:"tables"`
	// CheckpointBytes and OtherBytes are the bytes added by the workload
	// to the tables of each kind.
	CheckpointBytes int64 `json:"checkpoint_bytes"`
	OtherBytes      int64 `json:"other_bytes"`
	// OtherOverCheckpoints is OtherBytes / CheckpointBytes.
	OtherOverCheckpoints float64 `json:"other_over_checkpoints"`
}

// tableKind is the kind of a store table (TableBytes.Kind).
func tableKind(table string) string {
	switch strings.TrimPrefix(table, "cairn_") {
	case "checkpoints", "snapshots":
		return "checkpoints"
	}
	return "other"
}

// tableSizes reads the bytes of every table of the store at storeURL
// (SQLite or PostgreSQL; nil for others) and of the database.
func tableSizes(ctx context.Context, storeURL string) (map[string]int64, int64, string, error) {
	switch store.Scheme(storeURL) {
	case "sqlite":
		return sqliteSizes(ctx, storeURL)
	case "postgres", "postgresql":
		return pgSizes(ctx, storeURL)
	}
	return nil, 0, "", nil
}

// storeBytes makes a StoreBytes of the sizes before and after a workload.
func storeBytes(before, after map[string]int64, database int64, method string) *StoreBytes {
	sb := &StoreBytes{Method: method, DatabaseBytes: database}
	for _, t := range slices.Sorted(maps.Keys(after)) {
		tb := TableBytes{Table: t, Kind: tableKind(t), Bytes: after[t], Added: after[t] - before[t]}
		sb.Tables = append(sb.Tables, tb)
		if tb.Kind == "checkpoints" {
			sb.CheckpointBytes += tb.Added
		} else {
			sb.OtherBytes += tb.Added
		}
	}
	if sb.CheckpointBytes > 0 {
		sb.OtherOverCheckpoints = float64(sb.OtherBytes) / float64(sb.CheckpointBytes)
	}
	return sb
}

// sqliteSizes measures a SQLite store's tables through dbstat, or by the
// bytes of their columns where the driver lacks it.
func sqliteSizes(ctx context.Context, storeURL string) (map[string]int64, int64, string, error) {
	path, _, err := sqlite.ParseURL(storeURL)
	if err != nil {
		return nil, 0, "", err
	}
	var database int64
	for _, f := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(f); err == nil {
			database += fi.Size()
		}
	}
	db, err := sql.Open("sqlite", sqlite.FileURI(path)+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, 0, "", fmt.Errorf("bench: sizes: %w", err)
	}
	defer db.Close()
	sizes, err := queryInt64Map(ctx, db, `SELECT COALESCE(m.tbl_name, s.name), SUM(s.pgsize) FROM dbstat s LEFT JOIN sqlite_schema m ON m.name = s.name GROUP BY 1`)
	if err == nil {
		return sizes, database, "dbstat", nil
	}
	sizes, err = columnSums(ctx, db)
	return sizes, database, "column sums", err
}

// columnSums is the bytes of every column of every table of db.
func columnSums(ctx context.Context, db *sql.DB) (map[string]int64, error) {
	tables, err := queryInt64Map(ctx, db, `SELECT name, 0 FROM sqlite_schema WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'`)
	if err != nil {
		return nil, fmt.Errorf("bench: sizes: %w", err)
	}
	for t := range tables {
		cols, err := queryInt64Map(ctx, db, `SELECT name, 0 FROM pragma_table_info(?)`, t)
		if err != nil || len(cols) == 0 {
			return nil, fmt.Errorf("bench: sizes: columns of %s: %v", t, err)
		}
		var terms []string
		for c := range cols {
			terms = append(terms, `COALESCE(length("`+strings.ReplaceAll(c, `"`, `""`)+`"), 0)`)
		}
		var n int64
		if err := db.QueryRowContext(ctx, `SELECT COALESCE(SUM(`+strings.Join(terms, "+")+`), 0) FROM "`+strings.ReplaceAll(t, `"`, `""`)+`"`).Scan(&n); err != nil {
			return nil, fmt.Errorf("bench: sizes: %s: %w", t, err)
		}
		tables[t] = n
	}
	return tables, nil
}

// pgSizes measures the tables of the store's schema (the first of its
// search_path) with pg_total_relation_size, and the whole database.
func pgSizes(ctx context.Context, storeURL string) (map[string]int64, int64, string, error) {
	conn, err := pgx.Connect(ctx, storeURL)
	if err != nil {
		return nil, 0, "", fmt.Errorf("bench: sizes: %w", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')`)
	if err != nil {
		return nil, 0, "", fmt.Errorf("bench: sizes: %w", err)
	}
	sizes := map[string]int64{}
	for rows.Next() {
		var t string
		var n int64
		if err := rows.Scan(&t, &n); err != nil {
			return nil, 0, "", fmt.Errorf("bench: sizes: %w", err)
		}
		sizes[t] = n
	}
	if err := rows.Err(); err != nil {
		return nil, 0, "", fmt.Errorf("bench: sizes: %w", err)
	}
	var database int64
	if err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&database); err != nil {
		return nil, 0, "", fmt.Errorf("bench: sizes: %w", err)
	}
	return sizes, database, "pg_total_relation_size", nil
}

// queryInt64Map reads rows of (name, number) into a map.
func queryInt64Map(ctx context.Context, db *sql.DB, q string, args ...any) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}
