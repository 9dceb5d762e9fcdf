// Package webhookapi serves the webhook routes apps call with their app
// key: POST, GET /api/v1/webhooks; GET, PATCH, DELETE /api/v1/webhooks/{id};
// POST …/rotate, GET …/deliveries, POST …/replay. Each handler authenticates
// the app key, then decodes the body, makes one call to the webhook
// service, and encodes.
package webhookapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/webhook"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 16 << 10

// Authenticator finds the app key a bearer secret belongs to (appkey).
type Authenticator interface {
	Authenticate(ctx context.Context, secret string) (registry.AppKey, error)
}

// Handlers serve the routes over a webhook service.
type Handlers struct {
	Auth     Authenticator
	Webhooks *webhook.Service
	Log      *slog.Logger
}

// Routes is the route table of the webhook routes (servers call them, not
// browsers: no CORS).
func (h *Handlers) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodPost, Pattern: routes.PathWebhooks, Handler: h.Create},
		{Method: http.MethodGet, Pattern: routes.PathWebhooks, Handler: h.List},
		{Method: http.MethodGet, Pattern: routes.PathWebhook, Handler: h.Get},
		{Method: http.MethodPatch, Pattern: routes.PathWebhook, Handler: h.Update},
		{Method: http.MethodDelete, Pattern: routes.PathWebhook, Handler: h.Delete},
		{Method: http.MethodPost, Pattern: routes.PathWebhookRotate, Handler: h.Rotate},
		{Method: http.MethodGet, Pattern: routes.PathWebhookDeliveries, Handler: h.Deliveries},
		{Method: http.MethodPost, Pattern: routes.PathWebhookReplay, Handler: h.Replay},
	}
}

// app authenticates the request's app key.
func (h *Handlers) app(ctx context.Context, req httpapi.Request) (registry.AppKey, error) {
	return h.Auth.Authenticate(ctx, httpapi.BearerToken(req))
}

// Create serves POST /api/v1/webhooks: {"url", "events", "description"?}
// → 201 with the endpoint and its secret, shown once.
func (h *Handlers) Create(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.app(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in webhook.Request
	if err := httpapi.DecodeJSON(req, MaxBodyBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Webhooks.Create(ctx, app, in)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusCreated, out), nil
}

// List serves GET /api/v1/webhooks: the app's endpoints, without secrets.
func (h *Handlers) List(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.app(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Webhooks.List(ctx, app)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Get serves GET /api/v1/webhooks/{id}.
func (h *Handlers) Get(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.app(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Webhooks.Get(ctx, app, req.PathParameters["id"])
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Update serves PATCH /api/v1/webhooks/{id}: sets what the body names
// (url, events, description, disabled).
func (h *Handlers) Update(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.app(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in webhook.Request
	if err := httpapi.DecodeJSON(req, MaxBodyBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Webhooks.Update(ctx, app, req.PathParameters["id"], in)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Delete serves DELETE /api/v1/webhooks/{id} → 204.
func (h *Handlers) Delete(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.app(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	if err := h.Webhooks.Delete(ctx, app, req.PathParameters["id"]); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.Response{StatusCode: http.StatusNoContent, Headers: map[string]string{}}, nil
}

// Rotate serves POST /api/v1/webhooks/{id}/rotate: the new secret, once;
// the old one signs beside it for 24 hours.
func (h *Handlers) Rotate(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.app(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Webhooks.Rotate(ctx, app, req.PathParameters["id"])
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Deliveries serves GET /api/v1/webhooks/{id}/deliveries?limit&after: the
// delivery log, newest first.
func (h *Handlers) Deliveries(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.app(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	limit := 0
	if v := req.QueryStringParameters["limit"]; v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 {
			return httpapi.Error(ctx, h.Log, apierror.New(apierror.InvalidRequest, "limit is a number from 1 to %d.", webhook.MaxListLimit)), nil
		}
	}
	out, err := h.Webhooks.Deliveries(ctx, app, req.PathParameters["id"], limit, req.QueryStringParameters["after"])
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Replay serves POST /api/v1/webhooks/{id}/replay: {"from_sequence",
// "agent_id"} or {"since", "agent_id"?} → 202 with how many agents'
// streams are re-sent, with their original webhook-ids.
func (h *Handlers) Replay(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.app(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in webhook.ReplayRequest
	if err := httpapi.DecodeJSON(req, MaxBodyBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Webhooks.Replay(ctx, app, req.PathParameters["id"], in)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusAccepted, out), nil
}
