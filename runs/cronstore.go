package runs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// Crons are items of one system tenant (cronTenant), whatever their
// tenant, so that one scheduler finds them all; each records its tenant,
// and every API call sees only its own tenant's. Under it:
//
//	["crons"] cron id          the cron (cronRecord)
//	["last"] cron id           the latest tick claimed: {"tick": unix seconds}
//	["ticks", cron id] tick    a tick's claim, written if absent: one process wins it
//	["pending"] cron id/tick   a claimed tick whose run is not made yet
//
// A tick is its time in unix seconds, written %012d.
const cronKind = "crons"

var (
	cronTenant = store.SystemTenant(cronKind, "")
	cronsNS    = []string{"crons"}
	lastNS     = []string{"last"}
	pendingNS  = []string{"pending"}
)

// cronClaimTTL is how long a tick's claim is kept: long past the time its
// cron's latest tick moves beyond it.
const cronClaimTTL = 48 * time.Hour

// cronStore keeps a service's crons in its item store.
type cronStore struct {
	s     *Service
	items store.ItemStore
}

func (s *Service) crons() cronStore { return cronStore{s: s, items: s.registry.items} }

// cronNow is the clock of the crons (Config.CronClock, else Config.Now).
func (s *Service) cronNow() time.Time {
	if s.cfg.CronClock != nil {
		return s.cfg.CronClock()
	}
	return s.cfg.Now()
}

func tickKey(t time.Time) string { return fmt.Sprintf("%012d", t.Unix()) }

func (cs cronStore) put(ctx context.Context, c cronRecord) error {
	return cs.items.Put(ctx, store.PutOp{Tenant: cronTenant, Namespace: cronsNS, Key: c.ID, Value: mustObject(c), NoIndex: true})
}

func (cs cronStore) get(ctx context.Context, id string) (cronRecord, error) {
	if store.ValidateItemKey(id) != nil {
		return cronRecord{}, store.ErrNotFound
	}
	it, err := cs.items.Get(ctx, store.GetOp{Tenant: cronTenant, Namespace: cronsNS, Key: id, NoRefresh: true})
	if err != nil {
		return cronRecord{}, err
	}
	return cronOf(it)
}

// remove deletes a cron and its latest tick (its claims expire).
func (cs cronStore) remove(ctx context.Context, id string) error {
	_, err := cs.items.Batch(ctx, []store.ItemOp{
		store.DeleteOp{Tenant: cronTenant, Namespace: cronsNS, Key: id},
		store.DeleteOp{Tenant: cronTenant, Namespace: lastNS, Key: id},
	})
	return err
}

// list returns the crons whose record matches filter.
func (cs cronStore) list(ctx context.Context, filter map[string]any) ([]cronRecord, error) {
	var out []cronRecord
	for off := 0; ; off += 1000 {
		items, err := cs.items.Search(ctx, store.SearchOp{Tenant: cronTenant, Prefix: cronsNS, Filter: filter, Limit: 1000, Offset: off, NoRefresh: true})
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			c, err := cronOf(it)
			if err != nil {
				cs.s.log.Warn("cron skipped", "err", err)
				continue
			}
			out = append(out, c)
		}
		if len(items) < 1000 {
			return out, nil
		}
	}
}

// last is the latest tick claimed of a cron (zero: none).
func (cs cronStore) last(ctx context.Context, id string) (time.Time, error) {
	it, err := cs.items.Get(ctx, store.GetOp{Tenant: cronTenant, Namespace: lastNS, Key: id, NoRefresh: true})
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	n, _ := it.Value["tick"].(json.Number)
	sec, _ := n.Int64()
	return time.Unix(sec, 0).UTC(), nil
}

// setLast records tick as a cron's latest claimed, unless a later one is.
func (cs cronStore) setLast(ctx context.Context, id string, tick time.Time) error {
	if l, err := cs.last(ctx, id); err != nil || !l.Before(tick) {
		return err
	}
	return cs.items.Put(ctx, store.PutOp{Tenant: cronTenant, Namespace: lastNS, Key: id, Value: map[string]any{"tick": tick.Unix()}, NoIndex: true})
}

// after is the time a cron runs the ticks after: when its schedule was
// set, or its latest tick claimed, whichever is later.
func (cs cronStore) after(ctx context.Context, c cronRecord) (time.Time, error) {
	last, err := cs.last(ctx, c.ID)
	if err != nil {
		return time.Time{}, err
	}
	from := time.Unix(0, c.From).UTC()
	if last.After(from) {
		return last, nil
	}
	return from, nil
}

// end is a cron's end_time (zero: none).
func (c cronRecord) end() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, c.EndTime) // checked when stored
	return t
}

// view is the API's view of a cron: its next run is the first tick after
// the latest claimed, if the cron is enabled and has not ended.
func (cs cronStore) view(ctx context.Context, c cronRecord, now time.Time) (Cron, error) {
	var next time.Time
	if c.Enabled {
		spec, err := parseCronSpec(c.Schedule, c.Timezone)
		if err != nil {
			return Cron{}, fmt.Errorf("%w: cron %q: %v", store.ErrCorrupt, c.ID, err)
		}
		after, err := cs.after(ctx, c)
		if err != nil {
			return Cron{}, err
		}
		if t, ok := spec.latest(after, now); ok {
			next = t // due, not claimed yet
		} else {
			next = spec.next(maxTime(after, now))
		}
		if end := c.end(); !end.IsZero() && next.After(end) {
			next = time.Time{}
		}
	}
	return cronViewOf(c, next), nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sortCrons sorts crons by a field (created_at by default), newest first
// unless order is asc.
func sortCrons(cs []Cron, by, order string) {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	key := func(c Cron) string {
		switch by {
		case "cron_id":
			return c.CronID
		case "assistant_id":
			return c.AssistantID
		case "thread_id":
			return str(c.ThreadID)
		case "updated_at":
			return c.UpdatedAt
		case "end_time":
			return str(c.EndTime)
		case "next_run_date":
			return str(c.NextRunDate)
		}
		return c.CreatedAt
	}
	slices.SortStableFunc(cs, func(a, b Cron) int {
		r := cmp.Or(strings.Compare(key(a), key(b)), strings.Compare(a.CronID, b.CronID))
		if order != "asc" {
			return -r
		}
		return r
	})
}
