package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn/store"
)

// PutKey implements store.KeyStore.
func (b *Backend) PutKey(ctx context.Context, k store.KeyRecord) error {
	if err := b.writable(); err != nil {
		return err
	}
	tag, err := b.pool.Exec(ctx, `INSERT INTO cairn_api_keys (id, tenant, name, hash, created_at) VALUES ($1,$2,$3,$4,$5) ON CONFLICT (id) DO NOTHING`,
		k.ID, k.Tenant, k.Name, k.Hash, k.CreatedAt)
	if err != nil {
		return wrap(err, "put key", "")
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: key %q exists", store.ErrConflict, k.ID)
	}
	return nil
}

const keyColumns = `id, tenant, name, hash, created_at`

func scanKey(row pgx.Row) (store.KeyRecord, error) {
	var k store.KeyRecord
	err := row.Scan(&k.ID, &k.Tenant, &k.Name, &k.Hash, &k.CreatedAt)
	return k, err
}

// Key implements store.KeyStore.
func (b *Backend) Key(ctx context.Context, id string) (store.KeyRecord, error) {
	k, err := scanKey(b.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM cairn_api_keys WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return k, fmt.Errorf("%w: key %q", store.ErrNotFound, id)
	}
	return k, wrap(err, "key", "")
}

// Keys implements store.KeyStore.
func (b *Backend) Keys(ctx context.Context, tenant string) ([]store.KeyRecord, error) {
	rows, err := b.pool.Query(ctx, `SELECT `+keyColumns+` FROM cairn_api_keys WHERE $1 = '' OR tenant = $1 ORDER BY id`, tenant)
	if err != nil {
		return nil, wrap(err, "keys", "")
	}
	defer rows.Close()
	var out []store.KeyRecord
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, wrap(err, "keys", "")
		}
		out = append(out, k)
	}
	return out, wrap(rows.Err(), "keys", "")
}

// DeleteKey implements store.KeyStore.
func (b *Backend) DeleteKey(ctx context.Context, id string) error {
	if err := b.writable(); err != nil {
		return err
	}
	tag, err := b.pool.Exec(ctx, `DELETE FROM cairn_api_keys WHERE id = $1`, id)
	if err != nil {
		return wrap(err, "delete key", "")
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: key %q", store.ErrNotFound, id)
	}
	return nil
}

var _ store.KeyStore = (*Backend)(nil)
