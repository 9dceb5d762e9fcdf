// Package metrics writes CloudWatch metrics as embedded metric format (EMF)
// log lines: Lambda's log delivery turns each line into metric data, with no
// API call from the function (locally the dev server's log shows the same
// lines). Every metric is in namespace Namespace, by app (dimension Tenant)
// and in aggregate (no dimension), which the stack's alarms watch.
package metrics

import (
	"context"
	"log/slog"
	"time"
)

// Namespace is the CloudWatch namespace of the platform's metrics.
const Namespace = "RemoteAgents"

// Metric names.
const (
	// SessionTokens, SessionCostUSD and SessionSeconds are an ended
	// session's model tokens, their cost and its life.
	SessionTokens  = "SessionTokens"
	SessionCostUSD = "SessionCostUSD"
	SessionSeconds = "SessionSeconds"
	// ModelCostUSD is one model call's cost: summed a day, an app's spend
	// (the daily cost alarm's metric).
	ModelCostUSD = "ModelCostUSD"
	// BudgetUsedPercent is how much of its spend caps an app has used, the
	// fullest of its day's and month's, after each call held against them
	// (the 80% and 100% alarms').
	BudgetUsedPercent = "BudgetUsedPercent"
	// LiveSessions is an app's live sessions, as its live count stands at
	// each sweep.
	LiveSessions = "LiveSessions"
	// EgressDenied counts the connections of an app's sandboxes the egress
	// proxy refused (once a minute for a sandbox and destination).
	EgressDenied = "EgressDenied"
	// SessionsAtMaxDuration counts sessions the platform ended because they
	// reached their maximum time (the alarm's: sessions that would outlive
	// it).
	SessionsAtMaxDuration = "SessionsAtMaxDuration"
)

// Value is one metric value and its unit (Count, Seconds, None).
type Value struct {
	Name  string
	Value float64
	Unit  string
}

// Emit writes values as one EMF line for tenant ("" for none), with props as
// properties (searchable in the logs, not dimensions).
func Emit(ctx context.Context, log *slog.Logger, tenant string, values []Value, props ...slog.Attr) {
	if log == nil || len(values) == 0 {
		return
	}
	defs := make([]map[string]string, len(values))
	attrs := make([]any, 0, len(values)+len(props)+2)
	for i, v := range values {
		defs[i] = map[string]string{"Name": v.Name, "Unit": v.Unit}
		attrs = append(attrs, slog.Float64(v.Name, v.Value))
	}
	dims := [][]string{{}}
	if tenant != "" {
		dims = [][]string{{"Tenant"}, {}}
		attrs = append(attrs, slog.String("Tenant", tenant))
	}
	attrs = append(attrs, slog.Any("_aws", map[string]any{
		"Timestamp":         time.Now().UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{"Namespace": Namespace, "Dimensions": dims, "Metrics": defs}},
	}))
	for _, p := range props {
		attrs = append(attrs, p)
	}
	log.InfoContext(ctx, "metrics", attrs...)
}
