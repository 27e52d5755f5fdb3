package store

import (
	"bytes"
	"testing"
)

// FuzzEventFrame: an event's frame reads back what was framed, and any
// stored bytes are read without a panic — as an unframed event, a framed
// one, or a corruption error.
func FuzzEventFrame(f *testing.F) {
	f.Add([]byte(`{"event":"values"}`), 1, "", int64(0))
	f.Add([]byte(`{}`), 3, "sub:1|inner:2", int64(77))
	f.Add([]byte{eventFrame, 0x80}, 0, "x", int64(1))
	f.Fuzz(func(t *testing.T, data []byte, attempt int, ns string, seq int64) {
		ev := EventRecord{Seq: 1, Attempt: max(attempt, 0) % (1 << 20), Data: data}
		if seq > 0 && seq < 1<<40 {
			ev.Ref = &EventRef{Namespace: ns, Seq: seq}
		}
		got, err := unframeEvents("r", frameEvents([]EventRecord{ev}))
		if err != nil {
			t.Fatalf("framed event does not read back: %v", err)
		}
		g := got[0]
		if g.Attempt != ev.Attempt || !bytes.Equal(g.Data, ev.Data) || (g.Ref == nil) != (ev.Ref == nil) || (g.Ref != nil && *g.Ref != *ev.Ref) {
			t.Fatalf("framed %+v (ref %v), read back %+v (ref %v)", ev, ev.Ref, g, g.Ref)
		}
		raw := EventRecord{Seq: 2, Data: data}
		if out, err := unframeEvents("r", []EventRecord{raw}); err == nil && len(data) > 0 && data[0] != eventFrame && !bytes.Equal(out[0].Data, data) {
			t.Fatalf("unframed data changed: %q → %q", data, out[0].Data)
		}
	})
}
