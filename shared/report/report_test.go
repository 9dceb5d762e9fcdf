package report_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/report"
)

// Not parallel: another test's httptest.Server.Close closes the idle
// connections of http.DefaultTransport, which the reporter posts through, and
// so could break this test's post.
func TestReportLogsAndPostsToWebhook(t *testing.T) {
	got := make(chan report.Exception, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e report.Exception
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
			t.Error(err)
		}
		got <- e
	}))
	defer hook.Close()
	var logs bytes.Buffer
	r := report.New(slog.New(slog.NewJSONHandler(&logs, nil)), hook.URL)
	r.Report(t.Context(), report.Exception{
		Source: "guardrail_injection", Severity: report.Critical, Message: "guardrails missing",
		Context: map[string]string{"agent_id": "a1", "persona_slug": "assistant"},
	})
	e := <-got
	if e.Source != "guardrail_injection" || e.Severity != report.Critical || e.Context["persona_slug"] != "assistant" || e.Time.IsZero() {
		t.Errorf("webhook got %+v", e)
	}
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log line %q: %v", logs.String(), err)
	}
	if line["source"] != "guardrail_injection" || line["severity"] != "critical" || line["ctx_agent_id"] != "a1" || line["level"] != "ERROR" {
		t.Errorf("log line %v", line)
	}
}

func TestReportSurvivesDeadWebhook(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer dead.Close()
	var logs bytes.Buffer
	report.New(slog.New(slog.NewJSONHandler(&logs, nil)), dead.URL).Report(t.Context(), report.Exception{
		Source: "guardrail_injection", Severity: report.Error, Message: "send failed",
	})
	if !strings.Contains(logs.String(), "exception webhook failed") {
		t.Errorf("dead webhook not logged: %s", logs.String())
	}
}
