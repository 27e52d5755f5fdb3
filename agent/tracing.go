package agent

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-dev/cairn/flow"
)

// Spans follow the OpenTelemetry GenAI semantic conventions. They are
// made with the tracer provider of the span the context carries (the flow
// runner's), so a program configures tracing once, on the runner.
func startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if info, ok := flow.Info(ctx); ok {
		attrs = append(attrs, attribute.String("gen_ai.conversation.id", info.Thread), attribute.String("cairn.task.key", info.Key))
	}
	tp := trace.SpanFromContext(ctx).TracerProvider()
	return tp.Tracer("github.com/cairn-dev/cairn/agent").Start(ctx, name, trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindClient))
}

// endSpan closes a span, marking a failure without its text: agent spans
// are made outside the runner's redaction, and an error's text may hold
// what a tool or a provider was given.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "failed")
		span.SetAttributes(attribute.String("error.type", fmt.Sprintf("%T", err)))
	}
	span.End()
}

// modelSpan records a model call's outcome: the model that answered, the
// tokens, and why it stopped (tool_calls or stop).
func modelSpan(span trace.Span, resp Response, err error) {
	if resp.Model != "" {
		span.SetAttributes(attribute.String("gen_ai.response.model", resp.Model))
		span.SetName("chat " + resp.Model)
	}
	finish := "stop"
	if len(resp.Message.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", resp.Usage.Input), attribute.Int64("gen_ai.usage.output_tokens", resp.Usage.Output))
	if err == nil {
		span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{finish}))
	}
	endSpan(span, err)
}
