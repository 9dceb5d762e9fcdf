package remote

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/remote-agents/remote-agents/sandbox/gateway"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/sanitize"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// maxToolRuns bounds the workspace tool requests a sandbox runs at once; the
// others wait for a slot.
const maxToolRuns = 4

// workspaceTools runs the workspace tool requests apps make (the inbox's
// ToolRequests), each once, through the brain's tools: the registry and
// policy the model's own calls go through, so that a tool the session's type
// does not enable is refused the same way, and output is redacted the same
// way. Results go back over the channel (POST tool-results).
type workspaceTools struct {
	tools llm.Tools
	cl    *gateway.Client
	// secrets are hidden from the arguments a result carries.
	secrets *redact.Secrets
	log     *slog.Logger
	slots   chan struct{}
	// seen are the requests taken (the serve loop's only).
	seen map[string]bool
	// inflight counts the requests taken and not yet answered.
	inflight atomic.Int32
}

// running reports whether a request taken is not yet answered: a
// checkpoint now could hold its files half written.
func (w *workspaceTools) running() bool { return w != nil && w.inflight.Load() > 0 }

func newWorkspaceTools(tools llm.Tools, cl *gateway.Client, secrets *redact.Secrets, log *slog.Logger) *workspaceTools {
	return &workspaceTools{tools: tools, cl: cl, secrets: secrets, log: log, slots: make(chan struct{}, maxToolRuns), seen: map[string]bool{}}
}

// take starts the requests not taken before; each runs in its own goroutine
// until ctx ends.
func (w *workspaceTools) take(ctx context.Context, reqs []sandboxwire.ToolRequest) {
	for _, q := range reqs {
		if w.seen[q.RequestID] {
			continue
		}
		w.seen[q.RequestID] = true
		w.inflight.Add(1)
		go func() {
			defer w.inflight.Add(-1)
			w.run(ctx, q)
		}()
	}
}

// run runs one request and posts its result. A request cancelled with the
// sandbox posts nothing: a later launch may run it.
func (w *workspaceTools) run(ctx context.Context, q sandboxwire.ToolRequest) {
	select {
	case w.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-w.slots }()
	res := llm.ToolResult{Content: "No workspace tool is called " + sanitize.Clip(q.Tool, 100) + ".", IsError: true}
	if toolspec.IsWorkspaceTool(q.Tool) {
		var err error
		res, err = w.tools.Run(ctx, llm.ToolCall{ID: "workspace-" + q.RequestID, Name: q.Tool, Args: q.Args})
		if err != nil {
			return // cancelled
		}
	}
	args := string(w.secrets.JSON(q.Args))
	in := sandboxwire.ToolResult{RequestID: q.RequestID, Tool: q.Tool, Output: sandboxwire.TruncateOutput(res.Content), IsError: res.IsError,
		Args: sanitize.Clip(args, sandboxwire.MaxEventTextChars)}
	var out sandboxwire.ToolResultResponse
	if err := w.cl.Do(ctx, http.MethodPost, sandboxwire.RouteToolResults, in, &out); err != nil && !errors.Is(err, context.Canceled) {
		w.log.Warn("post workspace tool result", slog.String("tool", q.Tool), slog.String("error", err.Error()))
		return
	}
	w.log.Info("workspace tool ran", slog.String("tool", q.Tool), slog.Bool("is_error", res.IsError))
}
