package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn/store"
)

// The scheduler: every Config.CronTick each server looks for the enabled
// crons with a tick due (after the latest claimed, at or before now and
// their end). Of the ticks a cron missed it runs the latest only. A tick
// is claimed by writing its claim if absent (store.PutOp.IfAbsent), in
// one batch with a pending entry: one process wins it, however many look.
// The winner makes the run, whose id (and a stateless cron's thread id)
// is derived from the cron and the tick, records the tick as the cron's
// latest and drops the pending entry. A process that dies between the
// claim and the end leaves the pending entry; once it is older than
// Config.CronClaimTimeout any server takes it over (again by a claim
// written if absent, one per timeout period) and makes the run unless a
// run of that id exists.

// cronPending is a claimed tick whose run may not be made yet.
type cronPending struct {
	Cron string `json:"cron_id"`
	Tick int64  `json:"tick"` // unix seconds
	At   int64  `json:"at"`   // unix nanoseconds, on the crons' clock
}

func pendingKey(cron string, tick time.Time) string { return cron + "/" + tickKey(tick) }

// startCrons runs the scheduler every period until the service closes
// (not at all without an item store, or with a negative period).
func (s *Service) startCrons(every time.Duration) {
	if s.registry.items == nil || every < 0 {
		return
	}
	ctx := s.runs.base
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.cronSweep(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// cronSweep takes over the stale pending ticks, then fires the due ones.
func (s *Service) cronSweep(ctx context.Context) {
	cs := s.crons()
	now := s.cronNow()
	cs.recover(ctx, now)
	crons, err := cs.list(ctx, map[string]any{"enabled": true})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("cron sweep", "err", err)
		}
		return
	}
	for _, c := range crons {
		if err := cs.due(ctx, c, now); err != nil && ctx.Err() == nil {
			s.log.Warn("cron tick", "cron", c.ID, "err", err)
		}
	}
}

// due fires a cron's latest due tick, if it has one.
func (cs cronStore) due(ctx context.Context, c cronRecord, now time.Time) error {
	spec, err := parseCronSpec(c.Schedule, c.Timezone)
	if err != nil {
		return fmt.Errorf("%w: cron %q: %v", store.ErrCorrupt, c.ID, err)
	}
	after, err := cs.after(ctx, c)
	if err != nil {
		return err
	}
	until := now
	if end := c.end(); !end.IsZero() && end.Before(now) {
		until = end
	}
	tick, ok := spec.latest(after, until)
	if !ok {
		return nil
	}
	return cs.fire(ctx, c, tick)
}

// fire claims a tick and makes its run; a tick another process claimed
// is its (or, if it dies, a takeover's).
func (cs cronStore) fire(ctx context.Context, c cronRecord, tick time.Time) error {
	won, err := cs.claim(ctx, c, tick)
	if err != nil || !won {
		return err
	}
	return cs.make(ctx, c, tick)
}

// claim writes a tick's claim, if absent, and its pending entry; won is
// false when another process claimed it first (the tick is then recorded
// as the cron's latest here too).
func (cs cronStore) claim(ctx context.Context, c cronRecord, tick time.Time) (won bool, err error) {
	p := cronPending{Cron: c.ID, Tick: tick.Unix(), At: cs.s.cronNow().UnixNano()}
	_, err = cs.items.Batch(ctx, []store.ItemOp{
		store.PutOp{Tenant: cronTenant, Namespace: []string{"ticks", c.ID}, Key: tickKey(tick), Value: map[string]any{"at": p.At}, NoIndex: true, TTL: cronClaimTTL, IfAbsent: true},
		store.PutOp{Tenant: cronTenant, Namespace: pendingNS, Key: pendingKey(c.ID, tick), Value: mustObject(p), NoIndex: true},
	})
	if errors.Is(err, store.ErrConflict) {
		return false, cs.setLast(ctx, c.ID, tick)
	}
	return err == nil, err
}

// make makes a claimed tick's run, then records the tick as the cron's
// latest and drops its pending entry. A run the service refuses (its
// thread gone or busy, its assistant gone) is logged and the tick is
// done; a store error leaves the entry for a takeover.
func (cs cronStore) make(ctx context.Context, c cronRecord, tick time.Time) error {
	runID, err := cs.s.cronRun(ctx, c, tick)
	var refusedErr *Error
	switch {
	case errors.As(err, &refusedErr):
		cs.s.log.Warn("cron tick made no run", "cron", c.ID, "tick", APITime(tick), "err", err)
	case err != nil:
		return err
	default:
		cs.s.log.Info("cron tick", "cron", c.ID, "tick", APITime(tick), "run", runID)
	}
	if err := cs.setLast(ctx, c.ID, tick); err != nil {
		return err
	}
	return cs.items.Delete(ctx, store.DeleteOp{Tenant: cronTenant, Namespace: pendingNS, Key: pendingKey(c.ID, tick)})
}

// recover takes over the pending ticks older than the claim timeout: a
// process claimed them and died (or is stuck) before it was done.
func (cs cronStore) recover(ctx context.Context, now time.Time) {
	timeout := cs.s.cfg.CronClaimTimeout
	for off := 0; ; off += 100 {
		items, err := cs.items.Search(ctx, store.SearchOp{Tenant: cronTenant, Prefix: pendingNS, Limit: 100, Offset: off, NoRefresh: true})
		if err != nil {
			if ctx.Err() == nil {
				cs.s.log.Warn("cron takeover", "err", err)
			}
			return
		}
		for _, it := range items {
			var p cronPending
			b, _ := json.Marshal(it.Value)
			if json.Unmarshal(b, &p) != nil || p.Cron == "" {
				continue
			}
			if age := now.Sub(time.Unix(0, p.At)); age >= timeout {
				if err := cs.takeOver(ctx, p, int64(age/timeout)); err != nil && ctx.Err() == nil {
					cs.s.log.Warn("cron takeover", "cron", p.Cron, "err", err)
				}
			}
		}
		if len(items) < 100 {
			return
		}
	}
}

// takeOver claims a stale pending tick for the nth time (one process wins
// each period) and makes its run, unless a run of its id exists.
func (cs cronStore) takeOver(ctx context.Context, p cronPending, n int64) error {
	tick := time.Unix(p.Tick, 0).UTC()
	err := cs.items.Put(ctx, store.PutOp{Tenant: cronTenant, Namespace: []string{"ticks", p.Cron}, Key: fmt.Sprintf("%s.%d", tickKey(tick), n),
		Value: map[string]any{"at": cs.s.cronNow().UnixNano()}, NoIndex: true, TTL: cronClaimTTL, IfAbsent: true})
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	if err != nil {
		return err
	}
	c, err := cs.get(ctx, p.Cron)
	if errors.Is(err, store.ErrNotFound) { // deleted since
		return cs.items.Delete(ctx, store.DeleteOp{Tenant: cronTenant, Namespace: pendingNS, Key: pendingKey(p.Cron, tick)})
	}
	if err != nil {
		return err
	}
	cs.s.log.Info("cron tick taken over", "cron", c.ID, "tick", APITime(tick))
	return cs.make(ctx, c, tick)
}

// cronID derives the id of a tick's run or thread from the cron and the
// tick: making it again finds what was made.
func cronID(cron string, tick time.Time, what string) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte("cairn/cron/"+cron+"/"+tickKey(tick)+"/"+what)).String()
}

// cronRun makes the run of a cron's tick, as its tenant: on its thread,
// or on a new one (stateless) deleted when the run ends unless the cron
// keeps them. A run of the tick's id made already is left as it is. The
// run's metadata names the cron and the tick.
func (s *Service) cronRun(ctx context.Context, c cronRecord, tick time.Time) (string, error) {
	ctx = WithTenant(ctx, c.Tenant)
	runID := cronID(c.ID, tick, "run")
	if _, err := s.runlog.Run(ctx, runID); err == nil || !errors.Is(err, store.ErrNotFound) {
		return runID, err
	}
	q := c.Payload.request()
	q.runID = runID
	q.Metadata = merged(q.Metadata, map[string]any{"cron_id": c.ID, "cron_tick": APITime(tick)})
	thread := c.ThreadID
	if thread == "" {
		thread, q.IfNotExists, q.temporary = cronID(c.ID, tick, "thread"), "create", c.OnRunCompleted != "keep"
	}
	_, err := s.Create(ctx, thread, q)
	return runID, err
}

// cronSettled marks the tick of a cron's stateless run done before its
// thread (and with it the run) is deleted: a takeover finds a tick made
// by its run, so without this a process that died after making the run,
// and before it dropped the tick's pending entry, would have the tick run
// again. Only a run whose id is its tick's (no client picks a run's id)
// settles a tick.
func (s *Service) cronSettled(ctx context.Context, run string, d Data) {
	id, _ := d.Metadata["cron_id"].(string)
	at, _ := d.Metadata["cron_tick"].(string)
	tick, err := time.Parse(time.RFC3339Nano, at)
	if id == "" || err != nil || s.registry.items == nil || run != cronID(id, tick, "run") {
		return
	}
	cs := s.crons()
	if err := cs.setLast(ctx, id, tick); err != nil {
		s.log.Warn("settling a cron tick", "cron", id, "err", err)
		return
	}
	if err := cs.items.Delete(ctx, store.DeleteOp{Tenant: cronTenant, Namespace: pendingNS, Key: pendingKey(id, tick)}); err != nil {
		s.log.Warn("settling a cron tick", "cron", id, "err", err)
	}
}
