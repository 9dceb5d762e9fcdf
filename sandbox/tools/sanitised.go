package tools

import (
	"context"

	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/shared/sanitize"
)

// Sanitised wraps tools so that their output reaches the model and the events
// without the secrets the sandbox knows (redacted), and failures only as
// sanitised text (FR2): no paths, tracebacks, module names or pids.
type Sanitised struct {
	llm.Tools
	Secrets *redact.Secrets
}

// Run runs a call, redacts its output and sanitises a failure.
func (s Sanitised) Run(ctx context.Context, call llm.ToolCall) (llm.ToolResult, error) {
	res, err := s.Tools.Run(ctx, call)
	if err == nil {
		res.Content = s.Secrets.String(res.Content)
	}
	if err == nil && res.IsError && res.Content != NotEnabled(call.Name) {
		// (A refused tool is answered in the spec's exact words, which hold
		// nothing to sanitise.)
		res.Content = sanitize.Error(res.Content)
	}
	return res, err
}
