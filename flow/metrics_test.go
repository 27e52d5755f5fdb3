package flow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// The runner's metrics count what happened: commits, step and commit
// latencies, retries and tokens.
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tries := 0
	g := flow.NewGraph(schema).
		AddNode("a", func(ctx context.Context, d state.Doc) (state.Update, error) {
			if tries++; tries == 1 {
				return nil, errors.New("once")
			}
			flow.AddTokens(ctx, 10, 3)
			return state.Update{"count": 1}, nil
		}, flow.WithRetry(flow.RetryPolicy{Attempts: 2, Initial: time.Millisecond})).
		AddNode("b", logNode("b")).Chain("a", "b")
	r := newRunner(t, g, inmem.Open(store.Options{}), flow.Options{MeterProvider: mp})
	if _, err := r.Invoke(context.Background(), "t", nil); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums, counts := map[string]int64{}, map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sums[m.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					counts[m.Name] += p.Count
				}
			}
		}
	}
	want := map[string]int64{"cairn.commits": 3, "cairn.retries": 1, "gen_ai.client.token.usage": 13}
	for name, n := range want {
		if sums[name] != n {
			t.Errorf("%s = %d, want %d (all: %v)", name, sums[name], n, sums)
		}
	}
	if counts["cairn.step.duration"] != 2 || counts["cairn.commit.duration"] != 3 {
		t.Errorf("histograms %v", counts)
	}
}
