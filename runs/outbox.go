package runs

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/internal/backoff"
	"github.com/cairn-dev/cairn/store"
)

// A run's webhook goes through an outbox in the store: written before the
// run's end is recorded, deleted once the receiver answers 2xx. A process
// that dies between the two leaves it there, and the next to start (or
// any server's sweep) delivers it — at least once: a receiver may get a
// run twice (a crash after its answer, two servers sweeping at once), never
// none while the entry lasts. Each attempt is a few tries with backoff;
// an entry that fails outboxAttempts attempts (about a day) is dropped
// with an error in the log.
const (
	outboxKind     = "webhooks"
	outboxAttempts = 12
	webhookTries   = 4
)

var (
	outboxNS    = []string{"outbox"}
	outboxTries = backoff.Policy{Initial: 500 * time.Millisecond, Max: 8 * time.Second}
	outboxLater = backoff.Policy{Initial: 30 * time.Second, Max: 4 * time.Hour}
)

// outboxEntry is a webhook waiting for delivery.
type outboxEntry struct {
	Run      string          `json:"run_id"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
	Attempts int             `json:"attempts"`
	NextAt   int64           `json:"next_at"` // unix nanoseconds
}

// outbox delivers the webhooks of the outbox of a service's store.
type outbox struct {
	s      *Service
	items  store.ItemStore // nil: the store keeps no items; deliveries are not durable
	flight sync.Map        // run id → struct{}: being delivered here
}

var outboxTenant = store.SystemTenant(outboxKind, "")

// keep writes a run's webhook to the outbox, before the run's end is
// recorded; deliver sends it once that is. ok is false for a run without
// a webhook.
func (o *outbox) keep(ctx context.Context, lr *Run) (e outboxEntry, ok bool) {
	u := lr.data.Kwargs.Webhook
	if u == "" {
		return e, false
	}
	body, err := o.s.runs.webhookBody(ctx, lr)
	if err != nil {
		o.s.log.Warn("run webhook not sent", "run", lr.rec.ID, "err", err)
		return e, false
	}
	e = outboxEntry{Run: lr.rec.ID, URL: u, Body: body, NextAt: o.s.cfg.Now().UnixNano()}
	if err := o.put(context.WithoutCancel(ctx), e); err != nil {
		o.s.log.Warn("run webhook not kept in the outbox: delivered from memory", "run", e.Run, "err", err)
	}
	return e, true
}

// put writes an entry (nothing without an item store). Its body is kept
// out of the store's text index.
func (o *outbox) put(ctx context.Context, e outboxEntry) error {
	if o.items == nil {
		return nil
	}
	return o.items.Put(ctx, store.PutOp{Tenant: outboxTenant, Namespace: outboxNS, Key: e.Run, Value: mustObject(e), NoIndex: true})
}

// deliver tries an entry a few times, apart, unless this process is at
// it already; then drops it (delivered, or given up) or leaves it for a
// later sweep.
func (o *outbox) deliver(e outboxEntry) {
	if _, busy := o.flight.LoadOrStore(e.Run, struct{}{}); busy {
		return
	}
	go func() {
		defer o.flight.Delete(e.Run)
		ctx := o.s.runs.base
		var err error
		for try := 1; try <= webhookTries; try++ {
			if err = o.s.postWebhook(ctx, e.URL, e.Body); err == nil || ctx.Err() != nil {
				break
			}
			o.s.log.Warn("run webhook failed", "run", e.Run, "try", try, "err", err)
			if backoff.Sleep(ctx, outboxTries.Delay(try, 0)) != nil {
				break
			}
		}
		if ctx.Err() == nil {
			o.settle(context.WithoutCancel(ctx), e, err)
		}
	}()
}

// settle drops a delivered entry, or records the failed attempt.
func (o *outbox) settle(ctx context.Context, e outboxEntry, err error) {
	if o.items == nil {
		return
	}
	del := store.DeleteOp{Tenant: outboxTenant, Namespace: outboxNS, Key: e.Run}
	e.Attempts++
	switch {
	case err == nil:
		err = o.items.Delete(ctx, del)
	case e.Attempts >= outboxAttempts:
		o.s.log.Error("run webhook given up", "run", e.Run, "attempts", e.Attempts, "err", err)
		err = o.items.Delete(ctx, del)
	default:
		e.NextAt = o.s.cfg.Now().Add(outboxLater.Delay(e.Attempts, 0)).UnixNano()
		err = o.put(ctx, e)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		o.s.log.Warn("run webhook outbox", "run", e.Run, "err", err)
	}
}

// sweep delivers the entries that are due: those a process left behind,
// and those whose next attempt has come.
func (o *outbox) sweep(ctx context.Context) {
	if o.items == nil {
		return
	}
	now := o.s.cfg.Now().UnixNano()
	for off := 0; ; off += 100 {
		items, err := o.items.Search(ctx, store.SearchOp{Tenant: outboxTenant, Prefix: outboxNS, Limit: 100, Offset: off})
		if err != nil {
			o.s.log.Warn("run webhook outbox sweep", "err", err)
			return
		}
		for _, it := range items {
			if e, ok := entryOf(it); ok && e.NextAt <= now {
				o.deliver(e)
			}
		}
		if len(items) < 100 {
			return
		}
	}
}

// start sweeps now, then every period, until the service closes.
func (o *outbox) start(every time.Duration) {
	ctx := o.s.runs.base
	o.sweep(ctx)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				o.sweep(ctx)
			}
		}
	}()
}

// entryOf reads an outbox item.
func entryOf(it store.Item) (outboxEntry, bool) {
	var e outboxEntry
	b, err := json.Marshal(it.Value)
	if err != nil || json.Unmarshal(b, &e) != nil || e.Run == "" || e.URL == "" {
		return e, false
	}
	return e, true
}

// mustObject is a value as a JSON object (its fields always marshal).
func mustObject(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}
