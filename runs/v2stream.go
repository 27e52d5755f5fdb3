package runs

import (
	"context"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// ordinals numbers each thread's runs in the order this process makes
// them (Data.Ordinal): one past the thread's newest run's, and past the
// last one it gave the thread, so that two runs made at once here never
// share one.
type ordinals struct {
	mu   sync.Mutex
	last map[string]int64
}

// nextOrdinal is the ordinal of a new run on thread.
func (s *Service) nextOrdinal(ctx context.Context, thread string) (int64, error) {
	recs, err := s.runlog.Runs(ctx, store.RunQuery{Thread: thread, Limit: 1})
	if err != nil {
		return 0, err
	}
	var newest int64
	if len(recs) > 0 {
		if d, err := DataOf(recs[0]); err == nil {
			newest = d.Ordinal
		}
	}
	o := &s.ordinals
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last == nil || len(o.last) > 4096 {
		o.last = map[string]int64{} // forget old threads: the store's newest run is the rule
	}
	n := max(newest, o.last[thread]) + 1
	o.last[thread] = n
	return n, nil
}

// V2Stream sends a thread's runs as the thread-centric protocol's events
// (V2Event), one run after another in the order they were made, until ctx
// ends: from the run whose event seq is since (since > 0), sending only
// later events, or else from the thread's newest run (a thread without
// runs: from its first). Every run's events are made from its log, so a
// reader resumes with since on any server, after a restart, with nothing
// sent twice or left out.
//
// values: the reader wants the values channel; without it the states are
// not built (the values events are still numbered, with no data).
func (s *Service) V2Stream(ctx context.Context, threadID string, since int64, values bool, send func([]V2Event) error) error {
	th, err := s.Thread(ctx, threadID)
	if err != nil {
		return err
	}
	rec, have, err := s.v2First(ctx, th.ID, since)
	fresh := have // rec is a run not sent yet
	for err == nil {
		if fresh {
			if err = s.v2Run(ctx, rec, since, values, send); err != nil {
				break
			}
		}
		var next store.RunRecord
		if next, fresh, err = s.v2Next(ctx, th.ID, rec, have); fresh {
			rec, have = next, true
		} else if err == nil {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if ctx.Err() != nil {
		return nil // the reader left
	}
	return err
}

// v2First is the run a stream starts from: the thread's run of since's
// ordinal, or the first made after it, or (since 0) its newest run.
func (s *Service) v2First(ctx context.Context, thread string, since int64) (store.RunRecord, bool, error) {
	want := V2OrdinalOf(since)
	var pick store.RunRecord
	found := false
	for off := 0; ; off += 50 {
		recs, err := s.runlog.Runs(ctx, store.RunQuery{Thread: thread, Limit: 50, Offset: off})
		if err != nil || (since == 0 && len(recs) > 0) {
			return firstOf(recs), len(recs) > 0, err
		}
		for _, r := range recs {
			d, err := DataOf(r)
			if err != nil {
				return r, false, err
			}
			if d.Ordinal < want {
				return pick, found, nil
			}
			pick, found = r, true
		}
		if len(recs) < 50 {
			return pick, found, nil
		}
	}
}

func firstOf(recs []store.RunRecord) store.RunRecord {
	if len(recs) == 0 {
		return store.RunRecord{}
	}
	return recs[0]
}

// v2Next is the run made next after cur on the thread, if there is one
// yet (have: cur is a run; else the thread's first run).
func (s *Service) v2Next(ctx context.Context, thread string, cur store.RunRecord, have bool) (store.RunRecord, bool, error) {
	var next store.RunRecord
	found := false
	for off := 0; ; off += 20 {
		recs, err := s.runlog.Runs(ctx, store.RunQuery{Thread: thread, Limit: 20, Offset: off})
		if err != nil {
			return next, false, err
		}
		for _, r := range recs {
			if have && (r.ID == cur.ID || r.CreatedAt < cur.CreatedAt || (r.CreatedAt == cur.CreatedAt && r.ID < cur.ID)) {
				return next, found, nil
			}
			next, found = r, true
		}
		if len(recs) < 20 {
			return next, found, nil
		}
	}
}

// v2Run sends one run's events after since, and its end.
func (s *Service) v2Run(ctx context.Context, rec store.RunRecord, since int64, values bool, send func([]V2Event) error) error {
	d, err := DataOf(rec)
	if err != nil {
		return err
	}
	now := func() int64 { return s.cfg.Now().UnixMilli() }
	c := newV2Conv(rec.ID, APIThreadID(rec.Thread), d.Graph(), d.Ordinal, now)
	c.valuesAsk = v2ValuesAsk(d)
	values = values || c.valuesAsk
	c.start()
	src := s.Events(nil, rec, 0, 1)
	for {
		evs, done, wake, err := src(ctx)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			data, err := s.v2Data(ctx, rec.Thread, ev, values)
			if err != nil {
				return err
			}
			c.event(ev.Event, data, ev.Attempt)
		}
		if err := sendAfter(c.take(), since, send); err != nil {
			return err
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
	if rec, err = s.runlog.Run(ctx, rec.ID); err != nil {
		return err
	}
	if d, err = DataOf(rec); err != nil {
		return err
	}
	c.end(rec.Status, d.Error)
	return sendAfter(c.take(), since, send)
}

// sendAfter sends the events numbered after since.
func sendAfter(evs []V2Event, since int64, send func([]V2Event) error) error {
	i := 0
	for i < len(evs) && evs[i].Seq <= since {
		i++
	}
	if i == len(evs) {
		return nil
	}
	return send(evs[i:])
}
