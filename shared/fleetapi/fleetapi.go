// Package fleetapi serves the fleet routes: GET /api/remote_agents (an app's
// agents, app key), POST /api/remote_agents/{id}/kill and PATCH
// /api/remote_agents/{id}/egress (app key or session token), GET /api/v1/usage and GET, PUT /api/v1/limits (app key), over
// packages fleet and usage. Its own package, so that the other session
// routes' functions link none of the fleet.
package fleetapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/fleet"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/usage"
)

// Handlers serve the fleet routes over a fleet service.
type Handlers struct {
	svc   *fleet.Service
	usage *usage.Service
	log   *slog.Logger
}

// New returns the fleet handlers.
func New(svc *fleet.Service, u *usage.Service, log *slog.Logger) *Handlers {
	return &Handlers{svc: svc, usage: u, log: log}
}

// Routes is the route table of the fleet routes, each answering CORS for
// allowedOrigins.
func (h *Handlers) Routes(allowedOrigins []string) []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodGet, Pattern: routes.PathAgents, Handler: httpapi.CORS(allowedOrigins, "GET", h.List), CORS: true},
		{Method: http.MethodPost, Pattern: routes.PathKill, Handler: httpapi.CORS(allowedOrigins, "POST", h.Kill), CORS: true},
		{Method: http.MethodPatch, Pattern: routes.PathEgress, Handler: httpapi.CORS(allowedOrigins, "PATCH", h.SetEgress), CORS: true},
		{Method: http.MethodPost, Pattern: routes.PathPause, Handler: httpapi.CORS(allowedOrigins, "POST", h.Pause), CORS: true},
		{Method: http.MethodPost, Pattern: routes.PathResume, Handler: httpapi.CORS(allowedOrigins, "POST", h.Resume), CORS: true},
		{Method: http.MethodGet, Pattern: routes.PathCheckpoints, Handler: httpapi.CORS(allowedOrigins, "GET", h.Checkpoints), CORS: true},
		// An app key's route, as the agent types' are: servers call it, not
		// browsers.
		{Method: http.MethodGet, Pattern: routes.PathUsage, Handler: h.Usage},
		{Method: http.MethodGet, Pattern: routes.PathLimits, Handler: h.GetLimits},
		{Method: http.MethodPut, Pattern: routes.PathLimits, Handler: h.PutLimits},
	}
}

// MaxLimitsBytes bounds the body of PUT /api/v1/limits.
const MaxLimitsBytes = 4 << 10

// GetLimits serves GET /api/v1/limits: the app key's own limits, the
// platform's, and the effective ones for the sessions it creates.
func (h *Handlers) GetLimits(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.svc.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, h.usage.LimitsOf(app)), nil
}

// PutLimits serves PUT /api/v1/limits: the app key's own limits, replaced
// whole and validated; they narrow the platform's for the sessions the key
// creates from now on.
func (h *Handlers) PutLimits(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.svc.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	var in registry.AppKeyLimits
	if err := httpapi.DecodeJSON(req, MaxLimitsBytes, &in); err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	out, err := h.usage.SetLimits(ctx, app, in)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Usage serves GET /api/v1/usage: the app's live agents and its model
// spend of the UTC day and month against its quota and caps.
func (h *Handlers) Usage(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.svc.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	out, err := h.usage.Of(ctx, app)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// List serves GET /api/remote_agents: a page of the app's agents, newest
// first, filtered by project_name, persona_slug, agent_type, state (one or
// several, comma-separated) or alive=true, limit and cursor (the previous
// page's next_cursor).
func (h *Handlers) List(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
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

// MaxEgressBytes bounds the body of PATCH /api/remote_agents/{id}/egress.
const MaxEgressBytes = 32 << 10

// SetEgress serves PATCH /api/remote_agents/{id}/egress: {"mode", "allow"}
// replaces the live agent's egress policy (narrowing only, with its
// session token; either way, with its tenant's app key).
func (h *Handlers) SetEgress(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	id, bearer := req.PathParameters["id"], httpapi.BearerToken(req)
	if _, err := h.svc.Authorize(ctx, id, bearer); err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	var in egress.Policy
	if err := httpapi.DecodeJSON(req, MaxEgressBytes, &in); err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	out, err := h.svc.SetEgress(ctx, id, bearer, in)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Pause serves POST /api/remote_agents/{id}/pause: a checkpoint, then no
// sandbox (the app key of its tenant or its session token). No body.
func (h *Handlers) Pause(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	out, err := h.svc.Pause(ctx, req.PathParameters["id"], httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Resume serves POST /api/remote_agents/{id}/resume: the agent goes on from
// its last checkpoint, or the body's {"checkpoint_id"}, answered once
// ready.
func (h *Handlers) Resume(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	var in fleet.ResumeRequest
	if req.Body != "" {
		// Who calls comes first: no body is read for a caller that may not.
		if _, err := h.svc.Authorize(ctx, req.PathParameters["id"], httpapi.BearerToken(req)); err != nil {
			return httpapi.Error(ctx, h.log, err), nil
		}
		if err := httpapi.DecodeJSON(req, 1024, &in); err != nil {
			return httpapi.Error(ctx, h.log, err), nil
		}
	}
	out, err := h.svc.Resume(ctx, req.PathParameters["id"], httpapi.BearerToken(req), in)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Checkpoints serves GET /api/remote_agents/{id}/checkpoints?limit=&cursor=.
func (h *Handlers) Checkpoints(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	q := req.QueryStringParameters
	limit := 0
	for name, v := range q {
		switch name {
		case "cursor":
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 100 {
				return httpapi.Error(ctx, h.log, apierror.New(apierror.InvalidRequest, "limit must be a number from 1 to 100.")), nil
			}
			limit = n
		default:
			return httpapi.Error(ctx, h.log, apierror.New(apierror.InvalidRequest, "Unknown query parameter %q.", name)), nil
		}
	}
	out, err := h.svc.Checkpoints(ctx, req.PathParameters["id"], httpapi.BearerToken(req), q["cursor"], limit)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Kill serves POST /api/remote_agents/{id}/kill: the agent ends now, with
// the app key of its tenant or its session token.
func (h *Handlers) Kill(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	out, err := h.svc.Kill(ctx, req.PathParameters["id"], httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}
