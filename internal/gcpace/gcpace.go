package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Defaults of a Pacer.
const (
	DefaultFloor = 8 << 20 // headroom never below 8 MiB
	minPercent   = 25
	maxPercent   = 400
	// startPercent is Go's default, kept until the first collection has
	// measured the live heap: a process starting up would otherwise keep
	// its start-up garbage.
	startPercent = 100
)

const liveMetric = "/gc/heap/live:bytes"

// Pacer sets GOGC after each collection from the live heap it found.
type Pacer struct {
	floor   uint64
	mu      sync.Mutex   // orders a cycle's GOGC before Stop's
	stopped bool         // guarded by mu
	percent atomic.Int64 // the GOGC last set
	prev    int          // GOGC when started, restored by Stop
	sample  []metrics.Sample
}

// sentinel is an object allocated only to be collected: its cleanup runs
// after the collection that finds it unreachable, which is the pacer's
// signal that a cycle ended. It holds a pointer and is larger than the
// tiny allocator's objects, so it is collected on its own.
type sentinel struct {
	_ *byte
	_ [6]uint64
}

// Start starts pacing with the given headroom floor in bytes (0:
// DefaultFloor). Stop restores the GOGC that was set before.
func Start(floor uint64) *Pacer {
	if floor == 0 {
		floor = DefaultFloor
	}
	p := &Pacer{floor: floor, sample: []metrics.Sample{{Name: liveMetric}}}
	p.prev = debug.SetGCPercent(startPercent)
	p.percent.Store(startPercent)
	p.arm()
	return p
}

// Percent is the GOGC the pacer last set.
func (p *Pacer) Percent() int { return int(p.percent.Load()) }

// Stop stops pacing and restores the GOGC set before Start.
func (p *Pacer) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	debug.SetGCPercent(p.prev)
}

func (p *Pacer) arm() {
	runtime.AddCleanup(&sentinel{}, func(p *Pacer) { p.cycle() }, p)
}

// cycle runs after a collection: it sets GOGC for the next one and arms
// again.
func (p *Pacer) cycle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	metrics.Read(p.sample)
	if v := p.sample[0].Value; v.Kind() == metrics.KindUint64 {
		if want := Percent(v.Uint64(), p.floor); want != int(p.percent.Load()) {
			p.percent.Store(int64(want))
			debug.SetGCPercent(want)
		}
	}
	p.arm()
}

// Percent is the GOGC that gives a live heap of live bytes a headroom of a
// quarter of it, at least floor bytes, between 25 and 400.
func Percent(live, floor uint64) int {
	if live == 0 {
		return startPercent
	}
	headroom := max(live/4, floor)
	pct := headroom * 100 / live
	return int(min(max(pct, minPercent), maxPercent))
}
