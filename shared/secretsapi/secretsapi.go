// Package secretsapi serves the secrets routes apps call with their app
// key: POST, GET /api/v1/secrets, PUT, DELETE /api/v1/secrets/{name}.
// Values are write-only: no answer holds one. Each handler authenticates
// the app key, then decodes the body, makes one call to the secrets
// service, and encodes.
package secretsapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/secrets"
)

// MaxBodyBytes bounds a request body: a value at its limit and its rules.
const MaxBodyBytes = 64 << 10

// Authenticator finds the app key a bearer secret belongs to (appkey).
type Authenticator interface {
	Authenticate(ctx context.Context, secret string) (registry.AppKey, error)
}

// Handlers serve the routes over a secrets service.
type Handlers struct {
	Auth    Authenticator
	Secrets *secrets.Service
	Log     *slog.Logger
}

// Routes is the route table of the secrets routes (servers call them, not
// browsers: no CORS).
func (h *Handlers) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodPost, Pattern: routes.PathSecrets, Handler: h.Create},
		{Method: http.MethodGet, Pattern: routes.PathSecrets, Handler: h.List},
		{Method: http.MethodPut, Pattern: routes.PathSecret, Handler: h.Put},
		{Method: http.MethodDelete, Pattern: routes.PathSecret, Handler: h.Delete},
	}
}

// Create serves POST /api/v1/secrets: {"name", "value", "inject": [...]} →
// 201 and the secret without its value.
func (h *Handlers) Create(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.Auth.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in secrets.Request
	if err := httpapi.DecodeJSON(req, MaxBodyBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Secrets.Create(ctx, app, in)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusCreated, out), nil
}

// List serves GET /api/v1/secrets: the app's secrets (?end_user=: that
// user's), without values.
func (h *Handlers) List(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.Auth.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Secrets.List(ctx, app, req.QueryStringParameters["end_user"])
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Put serves PUT /api/v1/secrets/{name}: {"value", "inject"} replaces
// (rotates) the secret; agents' requests carry the new value within
// seconds.
func (h *Handlers) Put(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.Auth.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in secrets.Request
	if err := httpapi.DecodeJSON(req, MaxBodyBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	switch u := req.QueryStringParameters["end_user"]; {
	case u != "" && in.EndUser != "" && u != in.EndUser:
		return httpapi.Error(ctx, h.Log, apierror.New(apierror.InvalidRequest, "end_user is named twice, differently (the query's and the body's).")), nil
	case u != "":
		in.EndUser = u
	}
	out, err := h.Secrets.Put(ctx, app, req.PathParameters["name"], in)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Delete serves DELETE /api/v1/secrets/{name} (?end_user=: that user's)
// → 204.
func (h *Handlers) Delete(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.Auth.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	if err := h.Secrets.Delete(ctx, app, req.PathParameters["name"], req.QueryStringParameters["end_user"]); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.Response{StatusCode: http.StatusNoContent, Headers: map[string]string{}}, nil
}
