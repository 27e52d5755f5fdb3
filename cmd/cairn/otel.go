package main

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"
)

// The OTLP export follows the standard variables: a signal's own
// OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT and _PROTOCOL, else
// OTEL_EXPORTER_OTLP_ENDPOINT (with the signal's path for HTTP) and
// OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (default) or grpc; the
// service is OTEL_SERVICE_NAME (default cairn). Without an endpoint
// nothing is exported.

// otlpTarget is where and how a signal is exported ("" endpoint: nowhere).
func (a *app) otlpTarget(signal, path string) (endpoint string, grpc bool, err error) {
	proto := a.getenv("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL")
	if proto == "" {
		proto = a.getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "http/protobuf":
	case "grpc":
		grpc, path = true, ""
	default:
		return "", false, usagef("OTEL_EXPORTER_OTLP_PROTOCOL=%s: want http/protobuf or grpc", proto)
	}
	if e := a.getenv("OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT"); e != "" {
		return e, grpc, nil
	}
	if base := a.getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); base != "" {
		return strings.TrimSuffix(base, "/") + path, grpc, nil
	}
	return "", grpc, nil
}

func (a *app) serviceResource() *resource.Resource {
	name := a.getenv("OTEL_SERVICE_NAME")
	if name == "" {
		name = "cairn"
	}
	return resource.NewSchemaless(semconv.ServiceName(name))
}

// tracing makes the tracer provider the environment asks for (nil when
// none); stop flushes the spans still batched.
func (a *app) tracing(ctx context.Context) (tp trace.TracerProvider, stop func(), err error) {
	endpoint, grpc, err := a.otlpTarget("TRACES", "/v1/traces")
	if err != nil || endpoint == "" {
		return nil, func() {}, err
	}
	var exp sdktrace.SpanExporter
	if grpc {
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(endpoint))
	} else {
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	}
	if err != nil {
		return nil, nil, usagef("OTLP endpoint %s: %v", hideSecrets(endpoint), err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(a.serviceResource()))
	return sdk, func() { _ = sdk.Shutdown(context.WithoutCancel(ctx)) }, nil
}

// metering makes the meter provider the environment asks for (nil when
// none); stop sends what was measured.
func (a *app) metering(ctx context.Context) (mp metric.MeterProvider, stop func(), err error) {
	endpoint, grpc, err := a.otlpTarget("METRICS", "/v1/metrics")
	if err != nil || endpoint == "" {
		return nil, func() {}, err
	}
	var exp sdkmetric.Exporter
	if grpc {
		exp, err = otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpointURL(endpoint))
	} else {
		exp, err = otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(endpoint))
	}
	if err != nil {
		return nil, nil, usagef("OTLP endpoint %s: %v", hideSecrets(endpoint), err)
	}
	sdk := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)), sdkmetric.WithResource(a.serviceResource()))
	return sdk, func() { _ = sdk.Shutdown(context.WithoutCancel(ctx)) }, nil
}
