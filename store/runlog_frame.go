package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
)

// An event's stored bytes: its data as the server wrote it (a JSON
// object, first byte '{'), or, since attempts and references are kept,
//
//	0x01 uvarint(attempt) uvarint(len(ns)) ns uvarint(ref seq) data
//
// where a ref seq of 0 means the event has no reference. The frame is
// inside what encryption at rest seals, so backends see opaque bytes.
const eventFrame = 0x01

// frameEvents returns evs with Attempt and Ref carried in Data (a copy).
func frameEvents(evs []EventRecord) []EventRecord {
	out := make([]EventRecord, len(evs))
	for i, ev := range evs {
		var ns string
		var seq int64
		if ev.Ref != nil {
			ns, seq = ev.Ref.Namespace, ev.Ref.Seq
		}
		b := make([]byte, 0, 1+3*binary.MaxVarintLen64+len(ns)+len(ev.Data))
		b = append(b, eventFrame)
		b = binary.AppendUvarint(b, uint64(max(ev.Attempt, 0)))
		b = binary.AppendUvarint(b, uint64(len(ns)))
		b = append(b, ns...)
		b = binary.AppendUvarint(b, uint64(max(seq, 0)))
		out[i] = EventRecord{Seq: ev.Seq, Data: append(b, ev.Data...)}
	}
	return out
}

// unframeEvents reads Attempt and Ref back out of the events' data, in
// place; data without a frame (logs written before frames) is kept as it
// is, with attempt 0 and no reference.
func unframeEvents(run string, evs []EventRecord) ([]EventRecord, error) {
	for i := range evs {
		if err := unframe(&evs[i]); err != nil {
			return nil, &CorruptError{Seq: evs[i].Seq, What: fmt.Sprintf("event of run %q", run), Err: err}
		}
	}
	return evs, nil
}

func unframe(ev *EventRecord) error {
	b := ev.Data
	if len(b) == 0 || b[0] != eventFrame {
		return nil
	}
	b = b[1:]
	next := func() (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, errors.New("event frame cut short")
		}
		b = b[n:]
		return v, nil
	}
	attempt, err := next()
	if err != nil {
		return err
	}
	nsLen, err := next()
	if err != nil {
		return err
	}
	if nsLen > uint64(len(b)) {
		return errors.New("event frame's namespace runs past its end")
	}
	ns := string(b[:nsLen])
	b = b[nsLen:]
	seq, err := next()
	if err != nil {
		return err
	}
	if attempt > 1<<31 || seq > 1<<62 {
		return fmt.Errorf("event frame holds attempt %d, seq %d", attempt, seq)
	}
	ev.Attempt, ev.Data, ev.Ref = int(attempt), b, nil
	if seq > 0 {
		ev.Ref = &EventRef{Namespace: ns, Seq: int64(seq)}
	}
	return nil
}

// framedRunLog frames the events of a RunLog that is not an Engine's.
type framedRunLog struct{ RunLog }

func (f framedRunLog) AppendEvents(ctx context.Context, run string, evs []EventRecord) error {
	return f.RunLog.AppendEvents(ctx, run, frameEvents(evs))
}

func (f framedRunLog) Events(ctx context.Context, run string, after int64, limit int) ([]EventRecord, error) {
	evs, err := f.RunLog.Events(ctx, run, after, limit)
	if err != nil {
		return nil, err
	}
	return unframeEvents(run, evs)
}
