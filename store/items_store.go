package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/store/driver"
)

// itemStore is the ItemStore of an Engine's backend: it checks every
// operation, stamps times with the engine's clock, extracts the text
// indexed and asks the embedder for vectors before the backend sees
// anything.
type itemStore struct {
	b   driver.ItemBackend
	e   *Engine
	cfg itemConfig
}

// batchPlan is a checked batch: its writes as rows, and what its reads
// need.
type batchPlan struct {
	now     int64
	puts    []driver.ItemRow
	deletes []driver.ItemKey
	// putTexts are the texts to embed for each put (same order as puts).
	putTexts [][]string
	// reads: per op index, what the read needs.
	gets     map[int]getPlan
	searches map[int]*searchPlan
	lists    map[int]ListNamespacesOp
	// queries to embed, and their vectors once embedded.
	queries map[string][]float32
}

type getPlan struct {
	key       driver.ItemKey
	noRefresh bool
}

type searchPlan struct {
	op     SearchOp
	prefix string
	filter Filter
	terms  []string
}

func (s *itemStore) Batch(ctx context.Context, ops []ItemOp) ([]ItemResult, error) {
	if s.e.closed.Load() {
		return nil, ErrClosed
	}
	p, err := s.plan(ops)
	if err != nil {
		return nil, err
	}
	if err := s.embed(ctx, p); err != nil {
		return nil, err
	}
	results := make([]ItemResult, len(ops))
	var touch []driver.ItemKey
	for i := range ops {
		t, err := s.read(ctx, p, i, &results[i])
		if err != nil {
			return nil, opError(len(ops), i, err)
		}
		touch = append(touch, t...)
	}
	if len(touch) > 0 {
		if err := s.b.TouchItems(ctx, touch, p.now); err != nil && !errors.Is(err, ErrReadOnly) {
			return nil, err
		}
	}
	if len(p.puts)+len(p.deletes) > 0 {
		if err := s.b.WriteItems(ctx, p.puts, p.deletes); err != nil {
			return nil, err
		}
	}
	return results, nil
}

func opError(n, i int, err error) error {
	if n == 1 {
		return err
	}
	return fmt.Errorf("operation %d: %w", i, err)
}

// plan checks every operation and turns the writes into rows; the last
// write of a key wins.
func (s *itemStore) plan(ops []ItemOp) (*batchPlan, error) {
	p := &batchPlan{now: s.e.now().UnixNano(), gets: map[int]getPlan{}, searches: map[int]*searchPlan{}, lists: map[int]ListNamespacesOp{}, queries: map[string][]float32{}}
	writes := map[driver.ItemKey]int{} // key → index in puts (≥ 0) or -1 for a delete
	var order []driver.ItemKey
	for i, op := range ops {
		if err := s.planOp(p, op, i, writes, &order); err != nil {
			return nil, opError(len(ops), i, err)
		}
	}
	puts, texts := p.puts, p.putTexts
	p.puts, p.putTexts = nil, nil
	for _, k := range order {
		if j := writes[k]; j >= 0 {
			p.puts = append(p.puts, puts[j])
			p.putTexts = append(p.putTexts, texts[j])
		} else {
			p.deletes = append(p.deletes, k)
		}
	}
	return p, nil
}

func (s *itemStore) planOp(p *batchPlan, op ItemOp, i int, writes map[driver.ItemKey]int, order *[]driver.ItemKey) error {
	noteWrite := func(k driver.ItemKey, j int) {
		if _, seen := writes[k]; !seen {
			*order = append(*order, k)
		}
		writes[k] = j
	}
	switch o := op.(type) {
	case GetOp:
		k, err := checkItem(o.Tenant, o.Namespace, o.Key)
		p.gets[i] = getPlan{key: k, noRefresh: o.NoRefresh}
		return err
	case PutOp:
		row, texts, err := s.putRow(o, p.now)
		if err != nil {
			return err
		}
		if prev, seen := writes[row.ItemKey]; seen && row.IfAbsent {
			if prev >= 0 {
				return fmt.Errorf("%w: item %q in namespace %q is put twice, the second time if absent", ErrConflict, o.Key, JoinNamespace(o.Namespace))
			}
			row.IfAbsent = false // deleted earlier in the batch
		}
		p.puts, p.putTexts = append(p.puts, row), append(p.putTexts, texts)
		noteWrite(row.ItemKey, len(p.puts)-1)
	case DeleteOp:
		k, err := checkItem(o.Tenant, o.Namespace, o.Key)
		if err != nil {
			return err
		}
		noteWrite(k, -1)
	case SearchOp:
		sp, err := s.planSearch(o)
		if err != nil {
			return err
		}
		p.searches[i] = sp
		if sp.op.Query != "" && s.cfg.index.Embed != nil {
			p.queries[sp.op.Query] = nil
		}
	case ListNamespacesOp:
		if err := checkList(o); err != nil {
			return err
		}
		p.lists[i] = o
	case nil:
		return fmt.Errorf("%w: a nil operation", ErrInvalidArgument)
	default:
		return fmt.Errorf("%w: unknown operation %T", ErrInvalidArgument, op)
	}
	return nil
}

// putRow checks a put and makes its row (without vectors) and the texts
// its index holds.
func (s *itemStore) putRow(o PutOp, now int64) (driver.ItemRow, []string, error) {
	k, err := checkItem(o.Tenant, o.Namespace, o.Key)
	if err != nil {
		return driver.ItemRow{}, nil, err
	}
	if o.Value == nil {
		return driver.ItemRow{}, nil, fmt.Errorf("%w: value is nil (DeleteOp deletes an item)", ErrInvalidArgument)
	}
	if o.TTL < 0 {
		return driver.ItemRow{}, nil, fmt.Errorf("%w: ttl %s is negative", ErrInvalidArgument, o.TTL)
	}
	fields := s.cfg.fields
	if o.Index != nil {
		if fields, err = parseFieldPaths(o.Index, "index"); err != nil {
			return driver.ItemRow{}, nil, err
		}
	}
	raw, err := marshalPlain(o.Value)
	if err != nil {
		return driver.ItemRow{}, nil, fmt.Errorf("%w: value: %v", ErrInvalidArgument, err)
	}
	raw = bytes.TrimSpace(raw)
	row := driver.ItemRow{ItemKey: k, Value: raw, CreatedAt: now, UpdatedAt: now, TTL: int64(o.TTL), IfAbsent: o.IfAbsent}
	if o.TTL > 0 {
		row.ExpiresAt = now + int64(o.TTL)
	}
	if o.NoIndex {
		return row, nil, nil
	}
	value, err := decodeValue(raw)
	if err != nil {
		return driver.ItemRow{}, nil, err
	}
	var texts []string
	for _, f := range fields {
		texts = append(texts, f.texts(value)...)
	}
	row.Text = indexText(texts)
	return row, texts, nil
}

func (s *itemStore) planSearch(o SearchOp) (*searchPlan, error) {
	if err := validateTenant(o.Tenant); err != nil {
		return nil, err
	}
	if err := ValidateItemLabels(o.Prefix, "namespace prefix"); err != nil {
		return nil, err
	}
	if err := checkPage(o.Limit, o.Offset); err != nil {
		return nil, err
	}
	f, err := CompileFilter(o.Filter)
	if err != nil {
		return nil, err
	}
	if o.Limit == 0 {
		o.Limit = 10
	}
	sp := &searchPlan{op: o, prefix: JoinNamespace(o.Prefix), filter: f}
	if o.Query != "" && s.cfg.index.Embed == nil {
		sp.terms = queryTerms(o.Query)
	}
	return sp, nil
}

func checkList(o ListNamespacesOp) error {
	if err := validateTenant(o.Tenant); err != nil {
		return err
	}
	if err := ValidateItemLabels(o.Prefix, "prefix"); err != nil {
		return err
	}
	if err := ValidateItemLabels(o.Suffix, "suffix"); err != nil {
		return err
	}
	if o.MaxDepth < 0 {
		return fmt.Errorf("%w: max depth %d is negative", ErrInvalidArgument, o.MaxDepth)
	}
	return checkPage(o.Limit, o.Offset)
}

// embed asks the embedder, once, for the vectors of every text the
// batch's puts index and of every query its searches rank by.
func (s *itemStore) embed(ctx context.Context, p *batchPlan) error {
	emb := s.cfg.index.Embed
	if emb == nil {
		return nil
	}
	var texts []string
	seen := map[string]int{}
	add := func(t string) {
		if _, ok := seen[t]; !ok {
			seen[t] = len(texts)
			texts = append(texts, t)
		}
	}
	for _, ts := range p.putTexts {
		for _, t := range ts {
			add(t)
		}
	}
	for q := range p.queries {
		add(q)
	}
	if len(texts) == 0 {
		return nil
	}
	vecs, err := emb.Embed(ctx, texts)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrEmbedding, err)
	}
	if len(vecs) != len(texts) {
		return fmt.Errorf("%w: %d vectors for %d texts", ErrEmbedding, len(vecs), len(texts))
	}
	for _, v := range vecs {
		if len(v) != s.cfg.index.Dims {
			return fmt.Errorf("%w: the embedder answered a vector of %d dimensions; the index has %d", ErrEmbedding, len(v), s.cfg.index.Dims)
		}
	}
	for i, ts := range p.putTexts {
		for _, t := range ts {
			p.puts[i].Vectors = append(p.puts[i].Vectors, vecs[seen[t]])
		}
	}
	for q := range p.queries {
		p.queries[q] = vecs[seen[q]]
	}
	return nil
}

// read answers op i of the plan into res and returns the keys whose time
// to live the read refreshes.
func (s *itemStore) read(ctx context.Context, p *batchPlan, i int, res *ItemResult) ([]driver.ItemKey, error) {
	if g, ok := p.gets[i]; ok {
		return s.get(ctx, p.now, g, res)
	}
	if sp, ok := p.searches[i]; ok {
		items, touch, err := s.search(ctx, p, sp)
		res.Items = items
		return touch, err
	}
	if o, ok := p.lists[i]; ok {
		ns, err := s.listNamespaces(ctx, o, p.now)
		res.Namespaces = ns
		return nil, err
	}
	return nil, nil
}

func (s *itemStore) get(ctx context.Context, now int64, g getPlan, res *ItemResult) ([]driver.ItemKey, error) {
	rows, err := s.b.GetItems(ctx, []driver.ItemKey{g.key}, now)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	it, err := itemOf(rows[0])
	if err != nil {
		return nil, err
	}
	res.Item = &it
	if rows[0].TTL > 0 && !g.noRefresh {
		return []driver.ItemKey{g.key}, nil
	}
	return nil, nil
}

// itemOf decodes a row.
func itemOf(r driver.ItemRow) (Item, error) {
	v, err := decodeValue(r.Value)
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		return Item{}, fmt.Errorf("%w: item %q in namespace %q (tenant %q): its value is not a JSON object", ErrCorrupt, r.Key, r.Namespace, r.Tenant)
	}
	return Item{Namespace: SplitNamespace(r.Namespace), Key: r.Key, Value: m, CreatedAt: time.Unix(0, r.CreatedAt).UTC(), UpdatedAt: time.Unix(0, r.UpdatedAt).UTC()}, nil
}

func decodeValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// search runs one search: semantic when it has a query vector, else a
// scan (full-text when it has terms) filtered and paged as it goes.
func (s *itemStore) search(ctx context.Context, p *batchPlan, sp *searchPlan) ([]Item, []driver.ItemKey, error) {
	o := sp.op
	scan := driver.ItemScan{Tenant: o.Tenant, Prefix: sp.prefix, Now: p.now, Terms: sp.terms}
	if qv := p.queries[o.Query]; qv != nil {
		return s.semantic(ctx, scan, sp, qv)
	}
	if o.Query != "" && len(sp.terms) == 0 {
		return []Item{}, nil, nil // a query without a word matches nothing
	}
	out := []Item{}
	var touch []driver.ItemKey
	skipped := 0
	for r, err := range s.b.ScanItems(ctx, scan) {
		if err != nil {
			return nil, nil, err
		}
		it, err := itemOf(r)
		if err != nil {
			return nil, nil, err
		}
		if !sp.filter.Match(it.Value) {
			continue
		}
		if skipped < o.Offset {
			skipped++
			continue
		}
		if len(sp.terms) > 0 {
			it.Score = &r.Score
		}
		out = append(out, it)
		if r.TTL > 0 && !o.NoRefresh {
			touch = append(touch, r.ItemKey)
		}
		if len(out) == o.Limit {
			break
		}
	}
	return out, touch, nil
}

type scored struct {
	it    Item
	key   driver.ItemKey
	ttl   int64
	score float64
}

// semantic ranks every item with vectors under the prefix that passes the
// filter by the best cosine similarity of its vectors to the query's.
func (s *itemStore) semantic(ctx context.Context, scan driver.ItemScan, sp *searchPlan, qv []float32) ([]Item, []driver.ItemKey, error) {
	scan.Vectors = true
	var hits []scored
	for r, err := range s.b.ScanItems(ctx, scan) {
		if err != nil {
			return nil, nil, err
		}
		it, err := itemOf(r)
		if err != nil {
			return nil, nil, err
		}
		best, ok := 0.0, false
		for _, v := range r.Vectors {
			if len(v) == len(qv) {
				if c := cosine(qv, v); !ok || c > best {
					best, ok = c, true
				}
			}
		}
		if ok && sp.filter.Match(it.Value) {
			hits = append(hits, scored{it: it, key: r.ItemKey, ttl: r.TTL, score: best})
		}
	}
	slices.SortFunc(hits, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), strings.Compare(a.key.Namespace, b.key.Namespace), strings.Compare(a.key.Key, b.key.Key))
	})
	o := sp.op
	hits = hits[min(o.Offset, len(hits)):]
	hits = hits[:min(o.Limit, len(hits))]
	out := make([]Item, 0, len(hits))
	var touch []driver.ItemKey
	for _, h := range hits {
		h.it.Score = &h.score
		out = append(out, h.it)
		if h.ttl > 0 && !o.NoRefresh {
			touch = append(touch, h.key)
		}
	}
	return out, touch, nil
}

// listNamespaces matches the tenant's namespaces against the op's prefix
// and suffix (with "*" wildcards), cuts them to MaxDepth and pages them.
func (s *itemStore) listNamespaces(ctx context.Context, o ListNamespacesOp, now int64) ([][]string, error) {
	var literal []string
	for _, l := range o.Prefix {
		if l == "*" {
			break
		}
		literal = append(literal, l)
	}
	all, err := s.b.ItemNamespaces(ctx, o.Tenant, JoinNamespace(literal), now)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, joined := range all {
		ns := SplitNamespace(joined)
		if !labelsMatch(ns, o.Prefix, false) || !labelsMatch(ns, o.Suffix, true) {
			continue
		}
		if o.MaxDepth > 0 && len(ns) > o.MaxDepth {
			ns = ns[:o.MaxDepth]
		}
		out = append(out, ns)
	}
	slices.SortFunc(out, slices.Compare)
	out = slices.CompactFunc(out, slices.Equal)
	limit := o.Limit
	if limit == 0 {
		limit = 100
	}
	out = out[min(o.Offset, len(out)):]
	out = out[:min(limit, len(out))]
	if out == nil {
		out = [][]string{}
	}
	return out, nil
}

// labelsMatch reports whether ns starts (fromEnd: ends) with path, "*"
// matching any label.
func labelsMatch(ns, path []string, fromEnd bool) bool {
	if len(path) > len(ns) {
		return false
	}
	off := 0
	if fromEnd {
		off = len(ns) - len(path)
	}
	for i, l := range path {
		if l != "*" && ns[off+i] != l {
			return false
		}
	}
	return true
}

func (s *itemStore) Get(ctx context.Context, op GetOp) (Item, error) {
	res, err := s.Batch(ctx, []ItemOp{op})
	if err != nil {
		return Item{}, err
	}
	if res[0].Item == nil {
		return Item{}, fmt.Errorf("%w: item %q in namespace %q", ErrNotFound, op.Key, JoinNamespace(op.Namespace))
	}
	return *res[0].Item, nil
}

func (s *itemStore) Put(ctx context.Context, op PutOp) error {
	_, err := s.Batch(ctx, []ItemOp{op})
	return err
}

func (s *itemStore) Delete(ctx context.Context, op DeleteOp) error {
	_, err := s.Batch(ctx, []ItemOp{op})
	return err
}

func (s *itemStore) Search(ctx context.Context, op SearchOp) ([]Item, error) {
	res, err := s.Batch(ctx, []ItemOp{op})
	if err != nil {
		return nil, err
	}
	return res[0].Items, nil
}

func (s *itemStore) ListNamespaces(ctx context.Context, op ListNamespacesOp) ([][]string, error) {
	res, err := s.Batch(ctx, []ItemOp{op})
	if err != nil {
		return nil, err
	}
	return res[0].Namespaces, nil
}

func (s *itemStore) Sweep(ctx context.Context) (int64, error) {
	if s.e.closed.Load() {
		return 0, ErrClosed
	}
	return s.b.SweepItems(ctx, s.e.now().UnixNano())
}
