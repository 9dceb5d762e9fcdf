package telemetry_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/remote-agents/remote-agents/sandbox/telemetry"
)

// The OTLP exporter speaks OTLP/HTTP protobuf to a collector.
func TestOTLPSendsLogRecords(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []*collogs.ExportLogsServiceRequest
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/logs" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("request %s %s", r.URL.Path, r.Header.Get("Content-Type"))
		}
		var req collogs.ExportLogsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("not OTLP protobuf: %v", err)
		}
		mu.Lock()
		got = append(got, &req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer collector.Close()
	x, err := telemetry.New("otlp", collector.URL+"/v1/logs", "s1")
	if err != nil {
		t.Fatal(err)
	}
	x.Export(telemetry.Record{Kind: "message", Time: time.Now(), SessionID: "s1", Workflow: "w", Goal: "g", Agent: "critic",
		Role: "assistant", Content: "hello", InputTokens: 12, OutputTokens: 4, LatencyMS: 8.5, Model: "m", Iteration: 2})
	x.Export(telemetry.Record{Kind: "log", Time: time.Now(), SessionID: "s1", Level: "error", Content: "boom"})
	if err := x.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	attrs := map[string]string{}
	bodies := map[string]string{}
	for _, req := range got {
		for _, rl := range req.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				for _, lr := range sl.LogRecords {
					bodies[lr.Body.GetStringValue()] = lr.SeverityText
					for _, kv := range lr.Attributes {
						attrs[kv.Key] = kv.Value.String()
					}
				}
			}
		}
	}
	if bodies["hello"] != "INFO" || bodies["boom"] != "ERROR" {
		t.Errorf("records %v", bodies)
	}
	for _, k := range []string{"session_id", "workflow_name", "goal", "agent", "input_tokens", "output_tokens", "latency_ms", "model", "iteration"} {
		if _, ok := attrs[k]; !ok {
			t.Errorf("attribute %s missing (have %v)", k, attrs)
		}
	}
}
