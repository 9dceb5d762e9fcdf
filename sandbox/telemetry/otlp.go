package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// OTLP sends records as OpenTelemetry log records over OTLP/HTTP, batched by the
// OpenTelemetry SDK.
type OTLP struct {
	provider *sdklog.LoggerProvider
	logger   otellog.Logger
}

// NewOTLP exports to endpoint, the collector's logs URL (e.g.
// http://collector:4318/v1/logs).
func NewOTLP(ctx context.Context, endpoint string) (*OTLP, error) {
	exp, err := otlploghttp.New(ctx, otlploghttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("telemetry: otlp: %w", err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("remote-agents-agent"))
	provider := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(exp)), sdklog.WithResource(res))
	return &OTLP{provider: provider, logger: provider.Logger("github.com/remote-agents/remote-agents/sandbox")}, nil
}

// Export emits r as a log record: its content as the body, the rest as attributes.
func (o *OTLP) Export(r Record) {
	var rec otellog.Record
	rec.SetTimestamp(r.Time)
	rec.SetBody(attribute.StringValue(r.Content))
	sev, text := otellog.SeverityInfo, "INFO"
	switch r.Level {
	case "debug":
		sev, text = otellog.SeverityDebug, "DEBUG"
	case "warn":
		sev, text = otellog.SeverityWarn, "WARN"
	case "error":
		sev, text = otellog.SeverityError, "ERROR"
	}
	rec.SetSeverity(sev)
	rec.SetSeverityText(text)
	attrs := []attribute.KeyValue{
		attribute.String("kind", r.Kind),
		attribute.String("session_id", r.SessionID),
	}
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	add("workflow_name", r.Workflow)
	add("goal", r.Goal)
	add("agent", r.Agent)
	add("role", r.Role)
	add("model", r.Model)
	if r.InputTokens > 0 || r.OutputTokens > 0 {
		attrs = append(attrs, attribute.Int("input_tokens", r.InputTokens), attribute.Int("output_tokens", r.OutputTokens))
	}
	if r.LatencyMS > 0 {
		attrs = append(attrs, attribute.Float64("latency_ms", r.LatencyMS))
	}
	if r.Iteration > 0 {
		attrs = append(attrs, attribute.Int("iteration", r.Iteration))
	}
	for k, v := range r.Fields {
		attrs = append(attrs, attribute.String("field."+k, fmt.Sprint(v)))
	}
	rec.AddAttributes(attrs...)
	o.logger.Emit(context.Background(), rec)
}

// Close flushes and shuts the exporter down.
func (o *OTLP) Close(ctx context.Context) error {
	return o.provider.Shutdown(ctx)
}
