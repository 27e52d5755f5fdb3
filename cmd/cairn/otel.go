package main

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"
)

// tracing makes the tracer provider the OTEL_* environment variables ask
// for: spans exported over OTLP/HTTP (protobuf) to
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT +
// /v1/traces, as service OTEL_SERVICE_NAME (default cairn). Without an
// endpoint nothing is exported (nil provider, stop does nothing). stop
// flushes the spans still batched.
func (a *app) tracing(ctx context.Context) (tp trace.TracerProvider, stop func(), err error) {
	endpoint := a.otlpEndpoint("TRACES", "/v1/traces")
	if endpoint == "" {
		return nil, func() {}, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := a.getenv(k); p != "" && p != "http/protobuf" {
			return nil, nil, usagef("%s=%s: cairn exports OTLP over HTTP (http/protobuf)", k, p)
		}
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, nil, usagef("OTLP endpoint %s: %v", hideSecrets(endpoint), err)
	}
	name := a.getenv("OTEL_SERVICE_NAME")
	if name == "" {
		name = "cairn"
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(name))))
	return sdk, func() { _ = sdk.Shutdown(context.WithoutCancel(ctx)) }, nil
}

// otlpEndpoint is the OTLP/HTTP URL of a signal (TRACES, METRICS): its own
// variable, else the base endpoint with the signal's path ("" for none).
func (a *app) otlpEndpoint(signal, path string) string {
	if e := a.getenv("OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT"); e != "" {
		return e
	}
	if base := a.getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); base != "" {
		return strings.TrimSuffix(base, "/") + path
	}
	return ""
}

// metering makes the meter provider the environment asks for, exporting
// over OTLP/HTTP like tracing; stop sends what was measured.
func (a *app) metering(ctx context.Context) (mp metric.MeterProvider, stop func(), err error) {
	endpoint := a.otlpEndpoint("METRICS", "/v1/metrics")
	if endpoint == "" {
		return nil, func() {}, nil
	}
	exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, nil, usagef("OTLP endpoint %s: %v", hideSecrets(endpoint), err)
	}
	name := a.getenv("OTEL_SERVICE_NAME")
	if name == "" {
		name = "cairn"
	}
	sdk := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)),
		sdkmetric.WithResource(resource.NewSchemaless(semconv.ServiceName(name))))
	return sdk, func() { _ = sdk.Shutdown(context.WithoutCancel(ctx)) }, nil
}
