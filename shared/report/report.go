// Package report is the exception reporter: every report is a structured log line,
// and, when a webhook URL is configured, also a JSON POST to it (the monitoring
// hook). Reporting never fails the caller: a webhook that is down is logged.
package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Severity ranks a report.
type Severity string

// Severities, most severe first.
const (
	Critical Severity = "critical"
	Error    Severity = "error"
	Warning  Severity = "warning"
)

// webhookTimeout bounds the webhook call: a Lambda must not wait on monitoring.
const webhookTimeout = 3 * time.Second

// Exception is one report.
type Exception struct {
	Source   string            `json:"source"`
	Severity Severity          `json:"severity"`
	Message  string            `json:"message"`
	Context  map[string]string `json:"context,omitempty"`
	Time     time.Time         `json:"time"`
}

// Reporter sends exceptions to the log and the optional webhook.
type Reporter struct {
	log     *slog.Logger
	webhook string
	client  *http.Client
}

// New returns a reporter logging to log and, if webhookURL is not empty, posting to it.
func New(log *slog.Logger, webhookURL string) *Reporter {
	return &Reporter{log: log, webhook: webhookURL, client: &http.Client{Timeout: webhookTimeout}}
}

// Report records e. It returns once the webhook has answered or timed out.
func (r *Reporter) Report(ctx context.Context, e Exception) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	attrs := []any{
		slog.String("source", e.Source),
		slog.String("severity", string(e.Severity)),
	}
	for k, v := range e.Context {
		attrs = append(attrs, slog.String("ctx_"+k, v))
	}
	level := slog.LevelError
	if e.Severity == Warning {
		level = slog.LevelWarn
	}
	r.log.Log(ctx, level, "exception: "+e.Message, attrs...)
	if r.webhook == "" {
		return
	}
	if err := r.post(ctx, e); err != nil {
		r.log.WarnContext(ctx, "exception webhook failed", slog.String("source", e.Source), slog.String("error", err.Error()))
	}
}

func (r *Reporter) post(ctx context.Context, e Exception) error {
	body, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.webhook, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("post report: %w", err)
	}
	_ = res.Body.Close()
	if res.StatusCode >= 300 {
		return fmt.Errorf("post report: webhook answered %s", res.Status)
	}
	return nil
}
