package flow

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names Cairn's instrumentation.
const tracerName = "github.com/cairn-dev/cairn/flow"

// tracer is the runner's tracer: from Options.TracerProvider, else the
// global provider (a no-op unless the program set one).
func (r *Runner) tracer() trace.Tracer {
	tp := r.opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// startRun opens a run's span, "invoke_workflow", following the GenAI
// semantic conventions: the thread is the conversation.
func (r *Runner) startRun(ctx context.Context, op, thread string) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "invoke_workflow"),
		attribute.String("gen_ai.conversation.id", thread),
		attribute.String("cairn.operation", op),
	}
	if r.opts.Namespace != "" {
		attrs = append(attrs, attribute.String("cairn.namespace", r.opts.Namespace))
	}
	return r.tracer().Start(ctx, "invoke_workflow", trace.WithAttributes(attrs...))
}

// endSpan closes a span with the run's outcome.
func endSpan(span trace.Span, res Result, err error) {
	if res.RunID != "" {
		span.SetAttributes(attribute.String("cairn.run_id", res.RunID), attribute.Int64("cairn.seq", res.Head),
			attribute.String("cairn.stop_reason", string(res.StopReason)))
	}
	endWithError(span, err)
}

func endWithError(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// CaptureContent returns, for the running task's run, whether message
// content may go on spans (Options.CaptureContent) and the function that
// redacts it first; ok is false outside a node or when it may not.
func CaptureContent(ctx context.Context) (redact func([]byte) []byte, ok bool) {
	t := taskOf(ctx)
	if t == nil || !t.runner.opts.CaptureContent {
		return nil, false
	}
	return t.runner.opts.Redact.JSON, true
}
