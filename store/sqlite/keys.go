package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/store"
)

// PutKey implements store.KeyStore.
func (b *Backend) PutKey(ctx context.Context, k store.KeyRecord) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		res, err := c.ExecContext(ctx, `INSERT OR IGNORE INTO api_keys (id, tenant, name, hash, created_at) VALUES (?,?,?,?,?)`, k.ID, k.Tenant, k.Name, k.Hash, k.CreatedAt)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: key %q exists", store.ErrConflict, k.ID)
		}
		return nil
	})
}

const keyColumns = `id, tenant, name, hash, created_at`

func scanKey(row interface{ Scan(...any) error }) (store.KeyRecord, error) {
	var k store.KeyRecord
	err := row.Scan(&k.ID, &k.Tenant, &k.Name, &k.Hash, &k.CreatedAt)
	return k, err
}

// Key implements store.KeyStore.
func (b *Backend) Key(ctx context.Context, id string) (store.KeyRecord, error) {
	k, err := scanKey(b.read.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return k, fmt.Errorf("%w: key %q", store.ErrNotFound, id)
	}
	return k, b.readErr(err, "", "", 0, "key")
}

// Keys implements store.KeyStore.
func (b *Backend) Keys(ctx context.Context, tenant string) ([]store.KeyRecord, error) {
	rows, err := b.read.QueryContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE ? = '' OR tenant = ? ORDER BY id`, tenant, tenant)
	if err != nil {
		return nil, b.readErr(err, "", "", 0, "keys")
	}
	defer rows.Close()
	var out []store.KeyRecord
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, b.readErr(err, "", "", 0, "keys")
		}
		out = append(out, k)
	}
	return out, b.readErr(rows.Err(), "", "", 0, "keys")
}

// DeleteKey implements store.KeyStore.
func (b *Backend) DeleteKey(ctx context.Context, id string) error {
	return b.do(ctx, func(ctx context.Context, c *sql.Conn) error {
		res, err := c.ExecContext(ctx, `DELETE FROM api_keys WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: key %q", store.ErrNotFound, id)
		}
		return nil
	})
}

var _ store.KeyStore = (*Backend)(nil)
