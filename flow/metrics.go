package flow

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// instruments are a runner's metrics: step and commit latencies,
// commits, conflicts, node retries, and tokens.
type instruments struct {
	step     metric.Float64Histogram
	commit   metric.Float64Histogram
	commits  metric.Int64Counter
	conflict metric.Int64Counter
	retries  metric.Int64Counter
	tokens   metric.Int64Counter
	// in and out are the attributes of input and output token counts.
	in, out metric.AddOption
}

// newInstruments makes the instruments from Options.MeterProvider, else
// the global provider (a no-op unless the program set one). Instrument
// errors leave no-op instruments: metrics never stop a run.
func newInstruments(mp metric.MeterProvider) *instruments {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(tracerName)
	in := &instruments{}
	in.step, _ = m.Float64Histogram("cairn.step.duration", metric.WithUnit("s"), metric.WithDescription("Time from a step's start to its commit"))
	in.commit, _ = m.Float64Histogram("cairn.commit.duration", metric.WithUnit("s"), metric.WithDescription("Time of one checkpoint commit"))
	in.commits, _ = m.Int64Counter("cairn.commits", metric.WithDescription("Checkpoints committed"))
	in.conflict, _ = m.Int64Counter("cairn.conflicts", metric.WithDescription("Commits refused because another writer moved the head"))
	in.retries, _ = m.Int64Counter("cairn.retries", metric.WithDescription("Node attempts retried"))
	in.tokens, _ = m.Int64Counter("gen_ai.client.token.usage", metric.WithUnit("{token}"), metric.WithDescription("Model tokens counted by steps"))
	in.in = metric.WithAttributes(attribute.String("gen_ai.token.type", "input"))
	in.out = metric.WithAttributes(attribute.String("gen_ai.token.type", "output"))
	return in
}

// record adds one to c unless it is nil.
func record(ctx context.Context, c metric.Int64Counter, n int64, opts ...metric.AddOption) {
	if c != nil && n != 0 {
		c.Add(ctx, n, opts...)
	}
}
