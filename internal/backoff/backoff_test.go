package backoff

import (
	"context"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	p := Policy{Initial: 100 * time.Millisecond, Max: time.Second}
	for _, tc := range []struct {
		name  string
		n     int
		floor time.Duration
		lo    time.Duration
		hi    time.Duration
	}{
		{"first retry within initial", 1, 0, 1, 100 * time.Millisecond},
		{"third retry within four times initial", 3, 0, 1, 400 * time.Millisecond},
		{"capped at max", 30, 0, 1, time.Second},
		{"never below the floor", 1, 5 * time.Second, 5 * time.Second, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 200 {
				d := p.Delay(tc.n, tc.floor)
				if d < tc.lo || d > tc.hi {
					t.Fatalf("Delay(%d, %v) = %v, want in [%v, %v]", tc.n, tc.floor, d, tc.lo, tc.hi)
				}
			}
		})
	}
}

func TestDelayJitters(t *testing.T) {
	p := Policy{Initial: time.Second, Max: time.Second}
	seen := map[time.Duration]bool{}
	for range 50 {
		seen[p.Delay(1, 0)] = true
	}
	if len(seen) < 10 {
		t.Fatalf("50 delays took only %d values: no jitter", len(seen))
	}
}

func TestSleepCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("Sleep did not return when its context ended")
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v", err)
	}
}
