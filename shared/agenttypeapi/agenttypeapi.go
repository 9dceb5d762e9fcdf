// Package agenttypeapi serves the agent type routes apps and operators call
// with their app key: create and list agent types, read one, read and replace
// its workspace configuration. Each handler authenticates the app key, then
// decodes the body (none is read for a caller that may not call), makes one
// call to the agent type service, and encodes.
package agenttypeapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/remote-agents/remote-agents/shared/agenttype"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// MaxBodyBytes bounds a request body: a workspace configuration at its
// limits (20 setup commands of 4 KiB, a 2 KiB URL) fits with room to spare.
const MaxBodyBytes = 128 * 1024

// Authenticator finds the app key a bearer secret belongs to (appkey).
type Authenticator interface {
	// Authenticate returns the key, or missing_token / invalid_token.
	Authenticate(ctx context.Context, secret string) (registry.AppKey, error)
}

// Handlers serve the routes over an agent type service.
type Handlers struct {
	Auth  Authenticator
	Types *agenttype.Service
	Log   *slog.Logger
}

// Routes is the route table of the agent type routes.
func (h *Handlers) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodPost, Pattern: routes.PathAgentTypes, Handler: h.Create},
		{Method: http.MethodGet, Pattern: routes.PathAgentTypes, Handler: h.List},
		{Method: http.MethodGet, Pattern: routes.PathAgentType, Handler: h.Get},
		{Method: http.MethodGet, Pattern: routes.PathWorkspaceConfig, Handler: h.GetWorkspaceConfig},
		{Method: http.MethodPut, Pattern: routes.PathWorkspaceConfig, Handler: h.PutWorkspaceConfig},
	}
}

// Create serves POST /api/v1/agent-types: {"id", "name", "workspace_config"?}
// → 201 and the type.
func (h *Handlers) Create(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.Auth.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in agenttype.CreateRequest
	if err := httpapi.DecodeJSON(req, MaxBodyBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Types.Create(ctx, app, in)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusCreated, out), nil
}

// List serves GET /api/v1/agent-types: the app's tenant's types, then the
// platform's.
func (h *Handlers) List(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.Auth.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Types.List(ctx, app)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Get serves GET /api/v1/agent-types/{id}.
func (h *Handlers) Get(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.Auth.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Types.Get(ctx, app, req.PathParameters["id"])
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// GetWorkspaceConfig serves GET /api/v1/agent-types/{id}/workspace-config.
func (h *Handlers) GetWorkspaceConfig(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.Auth.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Types.WorkspaceConfig(ctx, app, req.PathParameters["id"])
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// PutWorkspaceConfig serves PUT /api/v1/agent-types/{id}/workspace-config:
// the whole configuration, validated, replaces the type's for sessions
// created from now on.
func (h *Handlers) PutWorkspaceConfig(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.Auth.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in registry.WorkspaceConfig
	if err := httpapi.DecodeJSON(req, MaxBodyBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Types.SetWorkspaceConfig(ctx, app, req.PathParameters["id"], in)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}
