package inmem

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/driver"
)

// itemRow is an item as this backend keeps it: the row, and the words of
// its text counted for full-text search.
type itemRow struct {
	row   driver.ItemRow
	words map[string]int
	n     int // words in the text
}

func (r *itemRow) expired(now int64) bool { return r.row.ExpiresAt != 0 && r.row.ExpiresAt <= now }

// copyRow returns a row callers may keep (vectors are never changed in
// place, so they are shared).
func (r *itemRow) copyRow() driver.ItemRow {
	out := r.row
	out.Value = bytes.Clone(r.row.Value)
	out.Text = ""
	return out
}

// WriteItems implements driver.ItemBackend.
func (b *Backend) WriteItems(_ context.Context, puts []driver.ItemRow, deletes []driver.ItemKey) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	if b.items == nil {
		b.items = map[driver.ItemKey]*itemRow{}
	}
	for _, p := range puts {
		if _, ok := b.items[p.ItemKey]; ok && p.IfAbsent && !slices.Contains(deletes, p.ItemKey) {
			return fmt.Errorf("%w: item %q in namespace %q exists", store.ErrConflict, p.Key, p.Namespace)
		}
	}
	for _, k := range deletes {
		delete(b.items, k)
	}
	for _, p := range puts {
		r := &itemRow{row: p, words: map[string]int{}}
		r.row.Value = bytes.Clone(p.Value)
		if old, ok := b.items[p.ItemKey]; ok && !old.expired(p.UpdatedAt) {
			r.row.CreatedAt = old.row.CreatedAt
		}
		for w := range strings.FieldsSeq(p.Text) {
			r.words[w]++
			r.n++
		}
		b.items[p.ItemKey] = r
	}
	return nil
}

// GetItems implements driver.ItemBackend.
func (b *Backend) GetItems(_ context.Context, keys []driver.ItemKey, now int64) ([]driver.ItemRow, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return nil, err
	}
	var out []driver.ItemRow
	for _, k := range keys {
		if r, ok := b.items[k]; ok && !r.expired(now) {
			out = append(out, r.copyRow())
		}
	}
	return out, nil
}

// under reports whether a joined namespace is prefix or below it.
func under(ns, prefix string) bool {
	return prefix == "" || ns == prefix || strings.HasPrefix(ns, prefix+".")
}

// ScanItems implements driver.ItemBackend: the rows are collected under
// the lock, then yielded without it.
func (b *Backend) ScanItems(_ context.Context, q driver.ItemScan) iter.Seq2[driver.ItemRow, error] {
	return func(yield func(driver.ItemRow, error) bool) {
		rows, err := b.scan(q)
		if err != nil {
			yield(driver.ItemRow{}, err)
			return
		}
		for _, r := range rows {
			if !yield(r, nil) {
				return
			}
		}
	}
}

func (b *Backend) scan(q driver.ItemScan) ([]driver.ItemRow, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return nil, err
	}
	var out []driver.ItemRow
	for k, r := range b.items {
		if k.Tenant != q.Tenant || !under(k.Namespace, q.Prefix) || r.expired(q.Now) || (q.Vectors && len(r.row.Vectors) == 0) {
			continue
		}
		score, ok := r.match(q.Terms)
		if !ok {
			continue
		}
		row := r.copyRow()
		row.Score = score
		if !q.Vectors {
			row.Vectors = nil
		}
		out = append(out, row)
	}
	slices.SortFunc(out, func(x, y driver.ItemRow) int {
		if len(q.Terms) > 0 {
			if c := cmp.Compare(y.Score, x.Score); c != 0 {
				return c
			}
		} else if c := cmp.Compare(y.UpdatedAt, x.UpdatedAt); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Key, y.Key))
	})
	return out, nil
}

// match reports whether the row's text holds every term, with a score:
// the share of its words that are query terms.
func (r *itemRow) match(terms []string) (float64, bool) {
	if len(terms) == 0 {
		return 0, true
	}
	hits := 0
	for _, t := range terms {
		c := r.words[t]
		if c == 0 {
			return 0, false
		}
		hits += c
	}
	return float64(hits) / float64(r.n), true
}

// ItemNamespaces implements driver.ItemBackend.
func (b *Backend) ItemNamespaces(_ context.Context, tenant, prefix string, now int64) ([]string, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.live(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for k, r := range b.items {
		if k.Tenant == tenant && under(k.Namespace, prefix) && !r.expired(now) {
			seen[k.Namespace] = true
		}
	}
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out, nil
}

// TouchItems implements driver.ItemBackend.
func (b *Backend) TouchItems(_ context.Context, keys []driver.ItemKey, now int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return err
	}
	for _, k := range keys {
		if r, ok := b.items[k]; ok && r.row.TTL > 0 && !r.expired(now) {
			r.row.ExpiresAt = now + r.row.TTL
		}
	}
	return nil
}

// SweepItems implements driver.ItemBackend.
func (b *Backend) SweepItems(_ context.Context, now int64) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.live(); err != nil {
		return 0, err
	}
	var n int64
	for k, r := range b.items {
		if r.expired(now) {
			delete(b.items, k)
			n++
		}
	}
	return n, nil
}

var _ driver.ItemBackend = (*Backend)(nil)
