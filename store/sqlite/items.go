package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// encodeItemValue is the one place an item's value is turned into the
// bytes of its value column (today the JSON as it is); k is the item it
// belongs to.
func encodeItemValue(_ driver.ItemKey, v []byte) ([]byte, error) { return v, nil }

// decodeItemValue undoes encodeItemValue.
func decodeItemValue(_ driver.ItemKey, b []byte) ([]byte, error) { return b, nil }

// WriteItems implements driver.ItemBackend: one transaction (a savepoint
// in the writer's batch) deletes and writes the rows and their full-text
// index entries.
func (b *Backend) WriteItems(ctx context.Context, puts []driver.ItemRow, deletes []driver.ItemKey) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		return savepoint(ctx, c, func() error {
			for _, k := range deletes {
				if err := deleteItem(ctx, c, k); err != nil {
					return err
				}
			}
			for i := range puts {
				if err := putItem(ctx, c, &puts[i]); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func deleteItem(ctx context.Context, c *sql.Conn, k driver.ItemKey) error {
	var id int64
	err := c.QueryRowContext(ctx, `DELETE FROM items WHERE tenant = ? AND ns = ? AND key = ? RETURNING id`, k.Tenant, k.Namespace, k.Key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = c.ExecContext(ctx, `DELETE FROM item_text WHERE rowid = ?`, id)
	return err
}

// putItem writes a row, keeping the CreatedAt of the row it replaces
// unless that one had expired, and replaces its full-text entry.
func putItem(ctx context.Context, c *sql.Conn, r *driver.ItemRow) error {
	val, err := encodeItemValue(r.ItemKey, r.Value)
	if err != nil {
		return err
	}
	var id int64
	if r.IfAbsent {
		err = c.QueryRowContext(ctx, `INSERT INTO items (tenant, ns, key, value, created_at, updated_at, ttl, expires_at, vectors) VALUES (?,?,?,?,?,?,?,?,?) RETURNING id`,
			r.Tenant, r.Namespace, r.Key, val, r.CreatedAt, r.UpdatedAt, r.TTL, r.ExpiresAt, nullBytes(driver.EncodeVectors(r.Vectors))).Scan(&id)
		if isConstraint(err) {
			return fmt.Errorf("%w: item %q in namespace %q exists", store.ErrConflict, r.Key, r.Namespace)
		}
		return putItemText(ctx, c, id, r.Text, err)
	}
	err = c.QueryRowContext(ctx, `INSERT INTO items (tenant, ns, key, value, created_at, updated_at, ttl, expires_at, vectors) VALUES (?,?,?,?,?,?,?,?,?)
		ON CONFLICT (tenant, ns, key) DO UPDATE SET value = excluded.value,
			created_at = CASE WHEN items.expires_at > 0 AND items.expires_at <= excluded.updated_at THEN excluded.created_at ELSE items.created_at END,
			updated_at = excluded.updated_at, ttl = excluded.ttl, expires_at = excluded.expires_at, vectors = excluded.vectors
		RETURNING id`,
		r.Tenant, r.Namespace, r.Key, val, r.CreatedAt, r.UpdatedAt, r.TTL, r.ExpiresAt, nullBytes(driver.EncodeVectors(r.Vectors))).Scan(&id)
	return putItemText(ctx, c, id, r.Text, err)
}

// putItemText replaces the full-text entry of row id, once its write
// (whose error is err) succeeded.
func putItemText(ctx context.Context, c *sql.Conn, id int64, text string, err error) error {
	if err != nil {
		return err
	}
	// A contentless FTS5 table takes a second row with the same rowid:
	// the old entry goes first.
	if _, err := c.ExecContext(ctx, `DELETE FROM item_text WHERE rowid = ?`, id); err != nil {
		return err
	}
	if text == "" {
		return nil
	}
	_, err = c.ExecContext(ctx, `INSERT INTO item_text (rowid, text) VALUES (?, ?)`, id, text)
	return err
}

const itemColumns = `i.tenant, i.ns, i.key, i.value, i.created_at, i.updated_at, i.ttl, i.expires_at`

// scanItem reads itemColumns, then the vectors and score when asked.
func scanItem(rows *sql.Rows, vectors, score bool) (driver.ItemRow, error) {
	var r driver.ItemRow
	dest := []any{&r.Tenant, &r.Namespace, &r.Key, &r.Value, &r.CreatedAt, &r.UpdatedAt, &r.TTL, &r.ExpiresAt}
	var vb []byte
	if vectors {
		dest = append(dest, &vb)
	}
	if score {
		dest = append(dest, &r.Score)
	}
	if err := rows.Scan(dest...); err != nil {
		return r, err
	}
	var err error
	if r.Value, err = decodeItemValue(r.ItemKey, r.Value); err != nil {
		return r, err
	}
	r.Vectors, err = driver.DecodeVectors(vb)
	return r, err
}

// GetItems implements driver.ItemBackend.
func (b *Backend) GetItems(ctx context.Context, keys []driver.ItemKey, now int64) ([]driver.ItemRow, error) {
	if b.noItems {
		return nil, nil
	}
	var out []driver.ItemRow
	for _, k := range keys {
		rows, err := b.query(ctx, `SELECT `+itemColumns+` FROM items i WHERE i.tenant = ? AND i.ns = ? AND i.key = ? AND (i.expires_at = 0 OR i.expires_at > ?)`, k.Tenant, k.Namespace, k.Key, now)
		if err != nil {
			return nil, b.readErr(err, "", "", 0, "items")
		}
		for rows.Next() {
			r, err := scanItem(rows, false, false)
			if err != nil {
				rows.Close()
				return nil, b.readErr(err, "", "", 0, "items")
			}
			out = append(out, r)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, b.readErr(err, "", "", 0, "items")
		}
	}
	return out, nil
}

// prefixCond selects the rows at or below a joined namespace (?2): "." is
// the separator and "/" the byte after it, so they lie in the range
// [?2, ?2 || '/') of the (tenant, ns, key) index, which the query searches;
// the last test drops the neighbours in that range ("a-b" beside "a").
const prefixCond = ` AND i.ns >= ?2 AND i.ns < ?2 || '/' AND (i.ns = ?2 OR substr(i.ns, 1, length(?2) + 1) = ?2 || '.')`

// scanQuery builds the query of a scan: ?1 tenant, ?2 prefix, ?3 now,
// ?4 the full-text match.
func scanQuery(q driver.ItemScan) string {
	var sb strings.Builder
	sb.WriteString(`SELECT ` + itemColumns)
	if q.Vectors {
		sb.WriteString(`, i.vectors`)
	}
	if len(q.Terms) > 0 {
		// CROSS JOIN keeps the full-text index the outer loop: the words
		// narrow the rows first.
		sb.WriteString(`, -bm25(item_text) FROM item_text CROSS JOIN items i ON i.id = item_text.rowid WHERE item_text MATCH ?4 AND i.tenant = ?1`)
	} else {
		sb.WriteString(` FROM items i WHERE i.tenant = ?1`)
	}
	if q.Prefix != "" {
		sb.WriteString(prefixCond)
	}
	sb.WriteString(` AND (i.expires_at = 0 OR i.expires_at > ?3)`)
	if q.Vectors {
		sb.WriteString(` AND i.vectors IS NOT NULL`)
	}
	if len(q.Terms) > 0 {
		sb.WriteString(` ORDER BY bm25(item_text), i.ns, i.key`)
	} else {
		sb.WriteString(` ORDER BY i.updated_at DESC, i.ns, i.key`)
	}
	return sb.String()
}

// matchExpr is the FTS5 query of terms: each quoted (terms hold only
// letters and digits), all required.
func matchExpr(terms []string) string {
	return `"` + strings.Join(terms, `" "`) + `"`
}

// ScanItems implements driver.ItemBackend.
func (b *Backend) ScanItems(ctx context.Context, q driver.ItemScan) iter.Seq2[driver.ItemRow, error] {
	return func(yield func(driver.ItemRow, error) bool) {
		if b.noItems {
			return
		}
		args := []any{q.Tenant, q.Prefix, q.Now} // ?2 may go unused: SQLite counts up to the highest
		if len(q.Terms) > 0 {
			args = append(args, matchExpr(q.Terms))
		}
		rows, err := b.query(ctx, scanQuery(q), args...)
		if err != nil {
			yield(driver.ItemRow{}, b.readErr(err, "", "", 0, "items"))
			return
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanItem(rows, q.Vectors, len(q.Terms) > 0)
			if err != nil {
				yield(driver.ItemRow{}, b.readErr(err, "", "", 0, "items"))
				return
			}
			if !yield(r, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(driver.ItemRow{}, b.readErr(err, "", "", 0, "items"))
		}
	}
}

// ItemNamespaces implements driver.ItemBackend.
func (b *Backend) ItemNamespaces(ctx context.Context, tenant, prefix string, now int64) ([]string, error) {
	if b.noItems {
		return nil, nil
	}
	q := `SELECT DISTINCT i.ns FROM items i WHERE i.tenant = ?1`
	if prefix != "" {
		q += prefixCond
	}
	q += ` AND (i.expires_at = 0 OR i.expires_at > ?3) ORDER BY i.ns`
	rows, err := b.query(ctx, q, tenant, prefix, now)
	if err != nil {
		return nil, b.readErr(err, "", "", 0, "item namespaces")
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var ns string
		if err := rows.Scan(&ns); err != nil {
			return nil, b.readErr(err, "", "", 0, "item namespaces")
		}
		out = append(out, ns)
	}
	return out, b.readErr(rows.Err(), "", "", 0, "item namespaces")
}

// TouchItems implements driver.ItemBackend.
func (b *Backend) TouchItems(ctx context.Context, keys []driver.ItemKey, now int64) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		for _, k := range keys {
			if _, err := c.ExecContext(ctx, `UPDATE items SET expires_at = ? + ttl WHERE tenant = ? AND ns = ? AND key = ? AND ttl > 0 AND expires_at > ?`,
				now, k.Tenant, k.Namespace, k.Key, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// sweepBatch is how many expired items one sweep transaction deletes.
const sweepBatch = 500

// SweepItems implements driver.ItemBackend: expired rows go in
// transactions of at most 500, so a large sweep does not hold the writer.
func (b *Backend) SweepItems(ctx context.Context, now int64) (int64, error) {
	var total int64
	for {
		var n int64
		err := b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
			rows, err := c.QueryContext(ctx, `DELETE FROM items WHERE id IN (SELECT id FROM items WHERE expires_at > 0 AND expires_at <= ? LIMIT ?) RETURNING id`, now, sweepBatch)
			if err != nil {
				return err
			}
			var ids []int64
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				ids = append(ids, id)
			}
			if err := rows.Close(); err != nil {
				return err
			}
			for _, id := range ids {
				if _, err := c.ExecContext(ctx, `DELETE FROM item_text WHERE rowid = ?`, id); err != nil {
					return err
				}
			}
			n = int64(len(ids))
			return nil
		})
		total += n
		if err != nil || n < sweepBatch {
			return total, err
		}
	}
}

var _ driver.ItemBackend = (*Backend)(nil)
