package gcpace

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name        string
		live, floor uint64
		want        int
	}{
		{"nothing measured yet", 0, DefaultFloor, 100},
		{"small heap gets the floor, at most 4×", 2 * mib, DefaultFloor, 400},
		{"the floor over a 4 MiB heap", 4 * mib, DefaultFloor, 200},
		{"the floor is the default's headroom", 8 * mib, DefaultFloor, 100},
		{"headroom of the floor", 16 * mib, DefaultFloor, 50},
		{"a quarter of a 32 MiB heap is the floor", 32 * mib, DefaultFloor, 25},
		{"quarter of a large heap", 400 * mib, DefaultFloor, 25},
		{"floor above the heap", 64 * mib, 128 * mib, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percent(tc.live, tc.floor); got != tc.want {
				t.Fatalf("Percent(%d, %d) = %d, want %d", tc.live, tc.floor, got, tc.want)
			}
		})
	}
}

// TestPacerFollowsTheHeap: with 96 MiB live the pacer lowers GOGC after a
// collection, and Stop restores what was set before.
func TestPacerFollowsTheHeap(t *testing.T) {
	before := debug.SetGCPercent(80)
	defer debug.SetGCPercent(before)
	p := Start(0)
	if p.Percent() != startPercent {
		t.Fatalf("starts at %d", p.Percent())
	}
	hold := make([][]byte, 96)
	for i := range hold {
		hold[i] = make([]byte, 1<<20)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Percent() >= 100 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := p.Percent(); got >= 100 || got < 25 {
		t.Fatalf("GOGC %d with 96 MiB live; want below 100", got)
	}
	runtime.KeepAlive(hold)
	p.Stop()
	if got := debug.SetGCPercent(80); got != 80 {
		t.Fatalf("Stop left GOGC at %d, want the 80 set before", got)
	}
}

// TestPacerRaisesASmallHeap: a test binary's live heap is far under the
// floor, so after a collection the pacer gives it more than GOGC=100.
func TestPacerRaisesASmallHeap(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	p := Start(0)
	defer p.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for p.Percent() <= startPercent && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := p.Percent(); got <= startPercent || got > maxPercent {
		t.Fatalf("GOGC %d for a small heap; want above %d, at most %d", got, startPercent, maxPercent)
	}
}
