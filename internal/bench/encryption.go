package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-dev/cairn/store"
)

// Comparison is a workload run without and with encryption at rest.
type Comparison struct {
	Plain     Result `json:"plain"`
	Encrypted Result `json:"encrypted"`
	// Rounds is how many times each was run, alternating; the fastest run
	// of each is kept.
	Rounds int `json:"rounds"`
	// Ratio is the encrypted run's time per step over the plain one's
	// (their fastest runs); MedianRatio the same of their median steps
	// (the lowest of the rounds), which the machine's other work disturbs
	// less.
	Ratio       float64 `json:"ratio"`
	MedianRatio float64 `json:"median_ratio"`
	// CPURatio is the same of their CPU time per step (the lowest of the
	// rounds): the cost of encryption on a machine busy with other work.
	CPURatio float64 `json:"cpu_ratio"`
}

// CompareEncryption runs the configured workload on fresh stores without
// and with encryption (a random key), alternating, rounds times each, and
// compares the fastest of each. cfg.Store must be empty (a fresh SQLite
// file per run).
func CompareEncryption(ctx context.Context, cfg Config, rounds int) (Comparison, error) {
	if cfg.Store != "" {
		return Comparison{}, fmt.Errorf("%w: the encryption comparison needs fresh stores: leave --store unset", store.ErrInvalidArgument)
	}
	ring := RandomKeyring()
	c := Comparison{Rounds: max(rounds, 1)}
	var medians, cpus [2]float64
	for range c.Rounds {
		for _, enc := range []bool{false, true} {
			run := cfg
			run.Keyring = nil
			best := &c.Plain
			if enc {
				run.Keyring, best = ring, &c.Encrypted
			}
			res, err := Run(ctx, run)
			if err != nil {
				return Comparison{}, err
			}
			if best.USPerStep == 0 || res.USPerStep < best.USPerStep {
				*best = res
			}
			lowest(&medians[b2i(enc)], res.USMedian)
			lowest(&cpus[b2i(enc)], res.CPUUSPerStep)
		}
	}
	c.Ratio = c.Encrypted.USPerStep / c.Plain.USPerStep
	c.MedianRatio = medians[1] / medians[0]
	c.CPURatio = cpus[1] / cpus[0]
	return c, nil
}

// lowest keeps in *m the lowest positive value it is given.
func lowest(m *float64, v float64) {
	if *m == 0 || v < *m {
		*m = v
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// medianUS is the median of step times, in microseconds.
func medianUS(ds []time.Duration) float64 { return quantileUS(ds, 0.5) }

// quantileUS is the q-quantile of step times (the nearest rank below), in
// microseconds: 0.5 the median, 1 the slowest.
func quantileUS(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(q*float64(len(s))))].Nanoseconds()) / 1e3
}

// RandomKeyring returns a keyring of one random key.
func RandomKeyring() *store.Keyring {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails
	ring, err := store.NewKeyring(key)
	if err != nil {
		panic(err) // a 32-byte key is always accepted
	}
	return ring
}
