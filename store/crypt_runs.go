package store

import (
	"context"
	"errors"
	"fmt"
)

// The run log's blobs (a run's data, its events) are sealed by the
// checked run log RunLogOf returns, and by the run queue of RunQueueFor.

func runBinding(r *RunRecord) binding {
	return binding{kind: sealRun, tenant: r.Tenant, thread: r.Thread, key: r.ID}
}

func eventBinding(run string, seq int64) binding {
	return binding{kind: sealEvent, key: run, seq: seq}
}

// sealRun returns r with its data sealed.
func (k *Keyring) sealRun(r RunRecord) RunRecord {
	if k != nil {
		b := runBinding(&r)
		r.Data = k.seal(&b, r.Data)
	}
	return r
}

// openRun opens the data of a run record read from a backend.
func (k *Keyring) openRun(r RunRecord) (RunRecord, error) {
	b := runBinding(&r)
	plain, err := k.openBlob(&b, r.Data)
	if errors.Is(err, ErrNoKey) && k == nil {
		return RunRecord{}, fmt.Errorf("run %q: %w", r.ID, err)
	}
	if err != nil {
		return RunRecord{}, &CorruptError{Thread: r.Thread, What: fmt.Sprintf("run record %q", r.ID), Err: err}
	}
	r.Data = plain
	return r, nil
}

// sealEvents returns evs with their data sealed (a copy).
func (k *Keyring) sealEvents(run string, evs []EventRecord) []EventRecord {
	if k == nil {
		return evs
	}
	out := make([]EventRecord, len(evs))
	for i, ev := range evs {
		b := eventBinding(run, ev.Seq)
		out[i] = EventRecord{Seq: ev.Seq, Data: k.seal(&b, ev.Data)}
	}
	return out
}

// openEvents opens the data of events read from a backend, in place.
func (k *Keyring) openEvents(run string, evs []EventRecord) ([]EventRecord, error) {
	for i := range evs {
		b := eventBinding(run, evs[i].Seq)
		plain, err := k.openBlob(&b, evs[i].Data)
		if errors.Is(err, ErrNoKey) && k == nil {
			return nil, fmt.Errorf("run %q event %d: %w", run, evs[i].Seq, err)
		}
		if err != nil {
			return nil, &CorruptError{Seq: evs[i].Seq, What: fmt.Sprintf("event of run %q", run), Err: err}
		}
		evs[i].Data = plain
	}
	return evs, nil
}

// sealedQueue seals the run records a run queue writes.
type sealedQueue struct {
	RunQueue
	ring *Keyring
}

func (q sealedQueue) EnqueueRun(ctx context.Context, r RunRecord, assistant string) error {
	return q.RunQueue.EnqueueRun(ctx, q.ring.sealRun(r), assistant)
}

func (q sealedQueue) RetryQueuedRun(ctx context.Context, r RunRecord) error {
	return q.RunQueue.RetryQueuedRun(ctx, q.ring.sealRun(r))
}
