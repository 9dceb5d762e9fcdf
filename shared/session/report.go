package session

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/report"
)

// ReportGuardrails reports a failure to prime an agent with the guardrails:
// the one place such an exception is built.
func ReportGuardrails(ctx context.Context, r Reporter, sev report.Severity, msg string, context map[string]string) {
	r.Report(ctx, report.Exception{Source: "guardrail_injection", Severity: sev, Message: msg, Context: context})
}
