// Package sessionapi serves the remote agent routes apps call: create, alive
// and shutdown, messages, attachments and env over the session service
// (Handlers), and the fleet's list and kill over the fleet service (Fleet).
// Each handler authenticates the caller, then decodes the body (none is read
// for a caller that may not call), makes one call to its service, and
// encodes.
package sessionapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/remote-agents/remote-agents/api/schema"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Handlers serve the routes over a session service.
type Handlers struct {
	svc *session.Service
	log *slog.Logger
}

// New returns the handlers.
func New(svc *session.Service, log *slog.Logger) *Handlers {
	return &Handlers{svc: svc, log: log}
}

// Routes is the route table of the app-facing session routes, each answering CORS
// for allowedOrigins.
func (h *Handlers) Routes(allowedOrigins []string) []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodPost, Pattern: routes.PathCreate, Handler: httpapi.CORS(allowedOrigins, "POST", h.Create), CORS: true},
		{Method: http.MethodGet, Pattern: routes.PathAlive, Handler: httpapi.CORS(allowedOrigins, "GET", h.Alive), CORS: true},
		{Method: http.MethodPost, Pattern: routes.PathShutdown, Handler: httpapi.CORS(allowedOrigins, "POST", h.Shutdown), CORS: true},
		{Method: http.MethodPost, Pattern: routes.PathEnv, Handler: httpapi.CORS(allowedOrigins, "POST", h.SubmitEnv), CORS: true},
		{Method: http.MethodPost, Pattern: routes.PathMessages, Handler: httpapi.CORS(allowedOrigins, "POST", h.Messages), CORS: true},
		{Method: http.MethodPost, Pattern: routes.PathAttachments, Handler: httpapi.CORS(allowedOrigins, "POST", h.Attachments), CORS: true},
	}
}

// Create serves POST /api/remote_agents/create.
func (h *Handlers) Create(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.svc.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	var in session.CreateRequest
	if err := httpapi.DecodeJSON(req, httpapi.MaxBodyBytes, &in); err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	in.IdempotencyKey = httpapi.Header(req, "Idempotency-Key")
	out, err := h.svc.Create(ctx, app, in)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Alive serves GET /api/remote_agents/{id}/alive.
func (h *Handlers) Alive(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	out, err := h.svc.Alive(ctx, req.PathParameters["id"], httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Shutdown serves POST /api/remote_agents/{id}/shutdown.
func (h *Handlers) Shutdown(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	out, err := h.svc.Shutdown(ctx, req.PathParameters["id"], httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// SubmitEnv serves POST /api/remote_agents/{id}/env, the answer to the agent's
// request_env_variables: {"values": {"KEY": "value"}, "secrets": [{"key",
// "value", "persist"}], "saveToConfiguration": bool} (session.EnvSubmission).
func (h *Handlers) SubmitEnv(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authorize(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	var in session.EnvSubmission
	if err := httpapi.DecodeJSON(req, session.MaxEnvBytes, &in); err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	out, err := h.svc.SubmitEnv(ctx, sess, in)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Messages serves POST /api/remote_agents/{id}/messages: a user's text (with
// attachments), an answer to a question, or env values, queued to the agent's
// inbox once per client_message_id.
func (h *Handlers) Messages(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authorize(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	var in session.MessageRequest
	if err := httpapi.DecodeJSON(req, session.MaxMessageBytes+session.MaxEnvBytes, &in); err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	out, err := h.svc.PostMessage(ctx, sess, in)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	res := httpapi.JSON(http.StatusOK, out)
	if out.Replayed {
		res.Headers["Idempotent-Replayed"] = "true"
	}
	return res, nil
}

// Attachments serves POST /api/remote_agents/{id}/attachments:
// {"name","size_bytes","content_type"} → a presigned URL to PUT the file to,
// and the key to attach to a message.
func (h *Handlers) Attachments(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authorize(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	var in schema.AttachmentRequest
	if err := httpapi.DecodeJSON(req, 4096, &in); err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	out, err := h.svc.PresignAttachment(ctx, sess, in.Name, in.ContentType, in.SizeBytes)
	if err != nil {
		return httpapi.Error(ctx, h.log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// authorize returns the session the request's token is for, the agent named
// in the path.
func (h *Handlers) authorize(ctx context.Context, req httpapi.Request) (session.Session, error) {
	return h.svc.Authorize(ctx, req.PathParameters["id"], httpapi.BearerToken(req))
}
