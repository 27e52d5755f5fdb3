package postgres

import (
	"context"
	"fmt"
	"iter"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// encodeItemValue is the one place an item's value is turned into the
// bytes of its value column (today the JSON as it is); k is the item it
// belongs to.
func encodeItemValue(_ driver.ItemKey, v []byte) ([]byte, error) { return v, nil }

// decodeItemValue undoes encodeItemValue.
func decodeItemValue(_ driver.ItemKey, b []byte) ([]byte, error) { return b, nil }

// putItemSQL writes a row, keeping the CreatedAt of the row it replaces
// unless that one had expired; its words become a tsvector of the
// 'simple' configuration (no stemming: the words as Cairn split them).
const putItemSQL = `INSERT INTO cairn_items (tenant, ns, key, value, created_at, updated_at, ttl, expires_at, text_index, vectors)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $9::text = '' THEN NULL ELSE to_tsvector('simple'::regconfig, $9::text) END, $10)
	ON CONFLICT (tenant, ns, key) DO UPDATE SET value = EXCLUDED.value,
		created_at = CASE WHEN cairn_items.expires_at > 0 AND cairn_items.expires_at <= EXCLUDED.updated_at THEN EXCLUDED.created_at ELSE cairn_items.created_at END,
		updated_at = EXCLUDED.updated_at, ttl = EXCLUDED.ttl, expires_at = EXCLUDED.expires_at, text_index = EXCLUDED.text_index, vectors = EXCLUDED.vectors`

// WriteItems implements driver.ItemBackend, in one transaction.
func (b *Backend) WriteItems(ctx context.Context, puts []driver.ItemRow, deletes []driver.ItemKey) error {
	if err := b.writable(); err != nil {
		return err
	}
	batch := &pgx.Batch{}
	for _, k := range deletes {
		batch.Queue(`DELETE FROM cairn_items WHERE tenant = $1 AND ns = $2 AND key = $3`, k.Tenant, k.Namespace, k.Key)
	}
	for _, r := range puts {
		val, err := encodeItemValue(r.ItemKey, r.Value)
		if err != nil {
			return err
		}
		q := putItemSQL
		if r.IfAbsent {
			q = putItemSQL[:strings.Index(putItemSQL, "ON CONFLICT")]
		}
		batch.Queue(q, r.Tenant, r.Namespace, r.Key, val, r.CreatedAt, r.UpdatedAt, r.TTL, r.ExpiresAt, r.Text, driver.EncodeVectors(r.Vectors))
	}
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, batch).Close() })
	if isUnique(err) {
		return fmt.Errorf("%w: an item written if absent exists: %w", store.ErrConflict, err)
	}
	return wrap(err, "write items", "")
}

const itemColumns = `tenant, ns, key, value, created_at, updated_at, ttl, expires_at`

// scanItem reads itemColumns, then the vectors and the score when asked.
func scanItem(rows pgx.Rows, vectors, score bool) (driver.ItemRow, error) {
	var r driver.ItemRow
	dest := []any{&r.Tenant, &r.Namespace, &r.Key, &r.Value, &r.CreatedAt, &r.UpdatedAt, &r.TTL, &r.ExpiresAt}
	var vb []byte
	if vectors {
		dest = append(dest, &vb)
	}
	var rank float32
	if score {
		dest = append(dest, &rank)
	}
	if err := rows.Scan(dest...); err != nil {
		return r, err
	}
	r.Score = float64(rank)
	var err error
	if r.Value, err = decodeItemValue(r.ItemKey, r.Value); err != nil {
		return r, err
	}
	r.Vectors, err = driver.DecodeVectors(vb)
	return r, err
}

// GetItems implements driver.ItemBackend.
func (b *Backend) GetItems(ctx context.Context, keys []driver.ItemKey, now int64) ([]driver.ItemRow, error) {
	var out []driver.ItemRow
	for _, k := range keys {
		rows, err := b.pool.Query(ctx, `SELECT `+itemColumns+` FROM cairn_items WHERE tenant = $1 AND ns = $2 AND key = $3 AND (expires_at = 0 OR expires_at > $4)`, k.Tenant, k.Namespace, k.Key, now)
		if err != nil {
			return nil, wrap(err, "items", "")
		}
		for rows.Next() {
			r, err := scanItem(rows, false, false)
			if err != nil {
				rows.Close()
				return nil, wrap(err, "items", "")
			}
			out = append(out, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, wrap(err, "items", "")
		}
	}
	return out, nil
}

// prefixCond selects the rows at or below a joined namespace ($N): "."
// is the separator and "/" the byte after it, so they lie in the range
// [$N, $N || '/') of the primary key, which the query searches; the last
// test drops the neighbours in that range ("a-b" beside "a").
const prefixCond = ` AND ns >= $%d AND ns < $%d || '/' AND (ns = $%d OR starts_with(ns, $%d || '.'))`

// scanQuery builds a scan's query and arguments: the unexpired rows of
// the tenant at or below the prefix.
func scanQuery(q driver.ItemScan) (string, []any) {
	args := []any{q.Tenant, q.Now}
	var sb strings.Builder
	sb.WriteString(`SELECT ` + itemColumns)
	if q.Vectors {
		sb.WriteString(`, vectors`)
	}
	if len(q.Terms) > 0 {
		args = append(args, strings.Join(q.Terms, " "))
		sb.WriteString(`, ts_rank(text_index, q) FROM cairn_items, plainto_tsquery('simple'::regconfig, $3::text) q WHERE text_index @@ q AND`)
	} else {
		sb.WriteString(` FROM cairn_items WHERE`)
	}
	sb.WriteString(` tenant = $1 AND (expires_at = 0 OR expires_at > $2)`)
	if q.Prefix != "" {
		args = append(args, q.Prefix)
		n := len(args)
		fmt.Fprintf(&sb, prefixCond, n, n, n, n)
	}
	if q.Vectors {
		sb.WriteString(` AND vectors IS NOT NULL`)
	}
	if len(q.Terms) > 0 {
		sb.WriteString(` ORDER BY ts_rank(text_index, q) DESC, ns, key`)
	} else {
		sb.WriteString(` ORDER BY updated_at DESC, ns, key`)
	}
	return sb.String(), args
}

// ScanItems implements driver.ItemBackend.
func (b *Backend) ScanItems(ctx context.Context, q driver.ItemScan) iter.Seq2[driver.ItemRow, error] {
	return func(yield func(driver.ItemRow, error) bool) {
		text, args := scanQuery(q)
		rows, err := b.pool.Query(ctx, text, args...)
		if err != nil {
			yield(driver.ItemRow{}, wrap(err, "items", ""))
			return
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanItem(rows, q.Vectors, len(q.Terms) > 0)
			if err != nil {
				yield(driver.ItemRow{}, wrap(err, "items", ""))
				return
			}
			if !yield(r, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(driver.ItemRow{}, wrap(err, "items", ""))
		}
	}
}

// ItemNamespaces implements driver.ItemBackend.
func (b *Backend) ItemNamespaces(ctx context.Context, tenant, prefix string, now int64) ([]string, error) {
	text, args := `SELECT DISTINCT ns FROM cairn_items WHERE tenant = $1 AND (expires_at = 0 OR expires_at > $2)`, []any{tenant, now}
	if prefix != "" {
		text += fmt.Sprintf(prefixCond, 3, 3, 3, 3)
		args = append(args, prefix)
	}
	rows, err := b.pool.Query(ctx, text+` ORDER BY ns`, args...)
	if err != nil {
		return nil, wrap(err, "item namespaces", "")
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, wrap(err, "item namespaces", "")
}

// TouchItems implements driver.ItemBackend.
func (b *Backend) TouchItems(ctx context.Context, keys []driver.ItemKey, now int64) error {
	if err := b.writable(); err != nil {
		return err
	}
	batch := &pgx.Batch{}
	for _, k := range keys {
		batch.Queue(`UPDATE cairn_items SET expires_at = $1 + ttl WHERE tenant = $2 AND ns = $3 AND key = $4 AND ttl > 0 AND expires_at > $1`, now, k.Tenant, k.Namespace, k.Key)
	}
	return wrap(b.pool.SendBatch(ctx, batch).Close(), "touch items", "")
}

// sweepBatch is how many expired items one sweep statement deletes.
const sweepBatch = 1000

// SweepItems implements driver.ItemBackend, in statements of at most 1000
// rows.
func (b *Backend) SweepItems(ctx context.Context, now int64) (int64, error) {
	if err := b.writable(); err != nil {
		return 0, err
	}
	var total int64
	for {
		tag, err := b.pool.Exec(ctx, `DELETE FROM cairn_items WHERE ctid IN (SELECT ctid FROM cairn_items WHERE expires_at > 0 AND expires_at <= $1 LIMIT $2)`, now, sweepBatch)
		if err != nil {
			return total, wrap(err, "sweep items", "")
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < sweepBatch {
			return total, nil
		}
	}
}

var _ driver.ItemBackend = (*Backend)(nil)
