// Package workspaceapi serves the workspace tool route apps call:
// POST /api/remote_agents/{id}/workspace/tools/{tool} runs one of the agent's
// workspace tools in its sandbox, under its policy. The handler
// authenticates the session token, refuses a tool the session cannot run
// before it reads the body, decodes, makes one call to the workspace tools
// (session.WorkspaceTools.RunWorkspaceTool), and encodes: 200 with the
// result, or 202 pending with the request id to ask again with.
package workspaceapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Tools authorizes the caller's token and runs a workspace tool in the
// session's sandbox (session.WorkspaceTools).
type Tools interface {
	Authorize(ctx context.Context, id, tok string) (session.Session, error)
	RunWorkspaceTool(ctx context.Context, sess session.Session, tool, requestID string, req session.WorkspaceToolRequest) (session.WorkspaceToolOutcome, error)
}

// Handlers serve the route over the workspace tools.
type Handlers struct {
	Sessions Tools
	Log      *slog.Logger
}

// Routes is the route table, answering CORS for allowedOrigins.
func (h *Handlers) Routes(allowedOrigins []string) []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodPost, Pattern: routes.PathWorkspaceTool, Handler: httpapi.CORS(allowedOrigins, "POST", h.Run), CORS: true},
	}
}

// Run serves POST /api/remote_agents/{id}/workspace/tools/{tool}: {"args":
// {...}} → {"request_id","tool","output","is_error"}, or 202 {"status":
// "pending","request_id","retry_after_seconds"}. An Idempotency-Key header
// names the request: a retry with it runs nothing twice and gets the
// result once there is one.
func (h *Handlers) Run(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.Sessions.Authorize(ctx, req.PathParameters["id"], httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	tool := req.PathParameters["tool"]
	if err := session.CheckWorkspaceTool(sess, tool); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in session.WorkspaceToolRequest
	if err := httpapi.DecodeJSON(req, session.MaxToolBodyBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Sessions.RunWorkspaceTool(ctx, sess, tool, httpapi.Header(req, "Idempotency-Key"), in)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	if out.Pending != nil {
		res := httpapi.JSON(http.StatusAccepted, out.Pending)
		res.Headers["Retry-After"] = "1"
		return res, nil
	}
	res := httpapi.JSON(http.StatusOK, out.Result)
	if out.Result.Replayed {
		res.Headers["Idempotent-Replayed"] = "true"
	}
	return res, nil
}
