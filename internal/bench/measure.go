package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// measureWrites writes the threads and records their figures: time,
// CPU, allocations and step times, with the process's resident memory
// before the first step.
func (cfg Config) measureWrites(ctx context.Context, s *store.Engine, schema *state.Schema, runThread threadRunner, threads []string, concurrent bool, res *Result) error {
	stepTimes := make([]time.Duration, cfg.Steps)
	var m0, m1 runtime.MemStats
	res.StartRSSBytes = peakRSS()
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime()
	start := time.Now()
	if err := writeThreads(ctx, s, schema, runThread, cfg.Steps, threads, concurrent, stepTimes); err != nil {
		return err
	}
	// The snapshots written after their commits are the run's work too.
	s.WaitSnapshots()
	total := time.Since(start)
	runtime.ReadMemStats(&m1)
	if err := cfg.writeHeap(""); err != nil {
		return err
	}
	steps := float64(cfg.Steps * len(threads))
	res.CPUUSPerStep = float64((cpuTime() - cpu0).Microseconds()) / steps
	res.AllocsPerStep, res.BytesPerStep = float64(m1.Mallocs-m0.Mallocs)/steps, float64(m1.TotalAlloc-m0.TotalAlloc)/steps
	res.TotalMS = ms(total)
	res.USPerStep = float64(total.Microseconds()) / steps
	res.StepsPerSec = steps / total.Seconds()
	tenth := max(1, cfg.Steps/10)
	res.USFirst10 = meanUS(stepTimes[:tenth])
	res.USLast10 = meanUS(stepTimes[len(stepTimes)-tenth:])
	res.USMedian = medianUS(stepTimes)
	res.USP99, res.USMax = quantileUS(stepTimes, 0.99), quantileUS(stepTimes, 1)
	return nil
}

// writeHeap writes the live heap to cfg.MemProfile+suffix, when set.
func (cfg Config) writeHeap(suffix string) error {
	if cfg.MemProfile == "" {
		return nil
	}
	f, err := os.Create(cfg.MemProfile + suffix)
	if err != nil {
		return fmt.Errorf("bench: heap profile: %w", err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("bench: heap profile: %w", err)
	}
	return f.Close()
}

// measureFloor measures, on a SQLite store, the floor of a durable step
// beside the store's file (min(S, 3000) commits) and the run's ratio to it.
func measureFloor(ctx context.Context, cfg Config, s *store.Engine, res *Result) error {
	sb, ok := s.Backend().(*sqlite.Backend)
	if !ok {
		return nil
	}
	dir, err := os.MkdirTemp(filepath.Dir(sb.Path()), "cairn-floor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	floor, err := SQLiteFloor(ctx, dir, cfg.Durability, min(cfg.Steps, 3000))
	if err != nil {
		return err
	}
	res.FloorUSPerCommit, res.RatioToFloor = floor.Plain, res.USPerStep/floor.Plain
	res.FloorPreparedUS, res.MedianToFloorPrepared = floor.Prepared, res.USMedian/floor.Prepared
	res.FloorBoundedUS, res.RatioToFloorBounded = floor.Bounded, res.USPerStep/floor.Bounded
	return nil
}

// measureReads times loading thread's head and walking its whole history
// with every state materialised. Each phase starts from a collected heap,
// as Go's benchmarks do, so one phase's garbage is not charged to the next.
func measureReads(ctx context.Context, s store.Store, thread string, steps int, res *Result) error {
	runtime.GC()
	t0 := time.Now()
	head, err := s.Load(ctx, store.LoadRequest{Thread: thread})
	if err != nil {
		return fmt.Errorf("load head: %w", err)
	}
	res.GetStateMS = ms(time.Since(t0))
	if n, _ := head.State.ListLen("messages"); n != steps {
		return fmt.Errorf("head state of thread %s has %d messages, want %d", thread, n, steps)
	}
	runtime.GC()
	t0 = time.Now()
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: thread, WithState: true, PageSize: 256}) {
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		if !cp.HasState {
			return fmt.Errorf("history: checkpoint %d has no state", cp.Seq)
		}
		res.HistoryItems++
	}
	res.HistoryMS = ms(time.Since(t0))
	return nil
}

// measureHead times one decode of the head state's bytes: its JSON
// parsed into a state, and its binary encoding (a snapshot's form)
// decoded.
func measureHead(d state.Doc, res *Result) error {
	js := d.AppendJSON(nil)
	res.HeadStateBytes = int64(len(js))
	runtime.GC()
	t0 := time.Now()
	if _, err := state.ParseDoc(js); err != nil {
		return fmt.Errorf("parse head: %w", err)
	}
	res.HeadDecodeMS = ms(time.Since(t0))
	enc := state.EncodeDoc(nil, d)
	runtime.GC()
	t0 = time.Now()
	if _, err := state.DecodeDoc(enc, false); err != nil {
		return fmt.Errorf("decode head: %w", err)
	}
	res.HeadDecodeBinaryMS = ms(time.Since(t0))
	return nil
}

// measureColdHead times a head load from a store opened anew on url.
func measureColdHead(ctx context.Context, cfg Config, url, thread string, res *Result) error {
	s, err := store.Open(ctx, url, store.OpenOptions{Store: store.Options{Keyring: cfg.Keyring}, Durability: string(cfg.Durability)})
	if err != nil {
		return err
	}
	defer s.Close()
	runtime.GC()
	t0 := time.Now()
	if _, err := s.Load(ctx, store.LoadRequest{Thread: thread}); err != nil {
		return fmt.Errorf("cold head load: %w", err)
	}
	res.HeadColdMS = ms(time.Since(t0))
	return nil
}

// countRows counts the checkpoint rows and snapshots the threads stored.
func countRows(ctx context.Context, s store.Store, threads []string, res *Result) error {
	for _, id := range threads {
		for cp, err := range s.History(ctx, store.HistoryRequest{Thread: id, PageSize: 1000}) {
			if err != nil {
				return err
			}
			res.CheckpointRows++
			if cp.Snapshot {
				res.Snapshots++
			}
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func meanUS(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum.Microseconds()) / float64(len(ds))
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS reads the process's peak resident set size (VmHWM) on Linux; 0
// elsewhere.
func peakRSS() int64 { return peakRSSOf("self") }

// peakRSSOf reads the peak resident set size (VmHWM) of process pid
// ("self": this one) on Linux; 0 elsewhere.
func peakRSSOf(pid string) int64 {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}
