package sessionapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/remote-agents/remote-agents/shared/fleet"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// Fleet serves the fleet routes over a fleet service.
type Fleet struct {
	svc *fleet.Service
	log *slog.Logger
}

// NewFleet returns the fleet handlers.
func NewFleet(svc *fleet.Service, log *slog.Logger) *Fleet {
	return &Fleet{svc: svc, log: log}
}

// Routes is the route table of the fleet routes, each answering CORS for
// allowedOrigins.
func (h *Fleet) Routes(allowedOrigins []string) []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodGet, Pattern: routes.PathAgents, Handler: httpapi.CORS(allowedOrigins, "GET", h.List), CORS: true},
		{Method: http.MethodPost, Pattern: routes.PathKill, Handler: httpapi.CORS(allowedOrigins, "POST", h.Kill), CORS: true},
	}
}

// List serves GET /api/remote_agents: a page of the app's agents, newest
// first, filtered by project_name, persona_slug, agent_type, state (one or
// several, comma-separated) or alive=true, limit and cursor (the previous
// page's next_cursor).
func (h *Fleet) List(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.svc.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	q, err := fleet.ParseListQuery(req.QueryStringParameters)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	out, err := h.svc.List(ctx, app, q)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Kill serves POST /api/remote_agents/{id}/kill: the agent ends now, with
// the app key of its tenant or its session token.
func (h *Fleet) Kill(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	out, err := h.svc.Kill(ctx, req.PathParameters["id"], httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}
