package metrics_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/remote-agents/remote-agents/shared/metrics"
)

// TestEmitIsEmbeddedMetricFormat: the line declares each metric, by tenant
// and in aggregate, in the namespace, and carries each value at the top.
func TestEmitIsEmbeddedMetricFormat(t *testing.T) {
	var buf bytes.Buffer
	metrics.Emit(t.Context(), slog.New(slog.NewJSONHandler(&buf, nil)), "t1",
		[]metrics.Value{{Name: metrics.SessionTokens, Value: 120, Unit: "Count"}, {Name: metrics.SessionCostUSD, Value: 0.5, Unit: "None"}},
		slog.String("session_id", "s1"))
	var line struct {
		AWS struct {
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Tokens  float64 `json:"SessionTokens"`
		Cost    float64 `json:"SessionCostUSD"`
		Tenant  string  `json:"Tenant"`
		Session string  `json:"session_id"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	m := line.AWS.CloudWatchMetrics
	if len(m) != 1 || m[0].Namespace != "RemoteAgents" || len(m[0].Dimensions) != 2 || m[0].Dimensions[0][0] != "Tenant" || len(m[0].Dimensions[1]) != 0 ||
		len(m[0].Metrics) != 2 || line.Tokens != 120 || line.Cost != 0.5 || line.Tenant != "t1" || line.Session != "s1" {
		t.Errorf("not an EMF line of both metrics: %s", buf.String())
	}
}
