package bench

import (
	"time"
)

// Summary sums up a series of times, in milliseconds.
type Summary struct {
	// First10 and Last10 are the medians of the first and of the last 10%
	// of the series (does a call get dearer as the workload goes on?);
	// Ratio is Last10 / First10.
	First10 float64 `json:"first10pct_median"`
	Last10  float64 `json:"last10pct_median"`
	Ratio   float64 `json:"last_over_first"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
	Mean    float64 `json:"mean"`
}

// summarize sums up ds (nil when empty).
func summarize(ds []time.Duration) *Summary {
	if len(ds) == 0 {
		return nil
	}
	tenth := max(1, len(ds)/10)
	s := &Summary{
		First10: quantileUS(ds[:tenth], 0.5) / 1000,
		Last10:  quantileUS(ds[len(ds)-tenth:], 0.5) / 1000,
		P50:     quantileUS(ds, 0.5) / 1000,
		P90:     quantileUS(ds, 0.9) / 1000,
		P99:     quantileUS(ds, 0.99) / 1000,
		Max:     quantileUS(ds, 1) / 1000,
		Mean:    meanUS(ds) / 1000,
	}
	if s.First10 > 0 {
		s.Ratio = s.Last10 / s.First10
	}
	return s
}
