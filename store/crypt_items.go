package store

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/cairn-dev/cairn/store/driver"
)

// sealedItems seals the values of the items an engine's item store writes
// and opens those it reads; the text index and the vectors stay as they
// are (the database searches the one; see docs/encryption.md for both).
type sealedItems struct {
	driver.ItemBackend
	ring *Keyring
}

func itemBinding(k driver.ItemKey) binding {
	return binding{kind: sealItem, tenant: k.Tenant, ns: k.Namespace, key: k.Key}
}

func (s sealedItems) WriteItems(ctx context.Context, puts []driver.ItemRow, deletes []driver.ItemKey) error {
	if s.ring != nil {
		sealed := make([]driver.ItemRow, len(puts))
		for i, r := range puts {
			b := itemBinding(r.ItemKey)
			r.Value = s.ring.seal(&b, r.Value)
			sealed[i] = r
		}
		puts = sealed
	}
	return s.ItemBackend.WriteItems(ctx, puts, deletes)
}

func (s sealedItems) GetItems(ctx context.Context, keys []driver.ItemKey, now int64) ([]driver.ItemRow, error) {
	rows, err := s.ItemBackend.GetItems(ctx, keys, now)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if err := s.open(&rows[i]); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

func (s sealedItems) ScanItems(ctx context.Context, q driver.ItemScan) iter.Seq2[driver.ItemRow, error] {
	return func(yield func(driver.ItemRow, error) bool) {
		for r, err := range s.ItemBackend.ScanItems(ctx, q) {
			if err == nil {
				err = s.open(&r)
			}
			if !yield(r, err) || err != nil {
				return
			}
		}
	}
}

// open opens a row's value in place.
func (s sealedItems) open(r *driver.ItemRow) error {
	b := itemBinding(r.ItemKey)
	plain, err := s.ring.openBlob(&b, r.Value)
	if errors.Is(err, ErrNoKey) && s.ring == nil {
		return fmt.Errorf("item %q in namespace %q: %w", r.Key, r.Namespace, err)
	}
	if err != nil {
		return &CorruptError{What: fmt.Sprintf("item %q in namespace %q (tenant %q)", r.Key, r.Namespace, r.Tenant), Err: err}
	}
	r.Value = plain
	return nil
}

// items re-seals every item value.
func (r *rekeyer) items(ctx context.Context) error {
	ir, ok := r.e.b.(driver.ItemRewriter)
	if !ok {
		return nil
	}
	var after driver.ItemKey
	const page = 200
	for {
		rows, err := ir.StoredItems(ctx, after, page)
		if err != nil {
			return err
		}
		for _, it := range rows {
			b := itemBinding(it.ItemKey)
			nw, err := r.reseal(&b, it.Value)
			if err != nil {
				return &CorruptError{What: fmt.Sprintf("item %q in namespace %q (tenant %q)", it.Key, it.Namespace, it.Tenant), Err: err}
			}
			if nw != nil {
				ok, err := ir.RewriteItem(ctx, it.ItemKey, it.Value, nw)
				if err := r.count("items", ok, err); err != nil {
					return err
				}
			}
		}
		if len(rows) < page {
			return nil
		}
		after = rows[len(rows)-1].ItemKey
	}
}
