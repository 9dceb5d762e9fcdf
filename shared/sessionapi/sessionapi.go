// Package sessionapi serves the remote agent routes apps call: create (over
// a Creator), alive and shutdown (a Control), and messages, attachments and
// env (an Inbox). Each handler authenticates the caller, then decodes the
// body (none is read for a caller that may not call), makes one call to its
// service, and encodes.
package sessionapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/remote-agents/remote-agents/api/schema"
	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Creator authenticates apps and makes their sessions (session.Creator).
type Creator interface {
	Authenticate(ctx context.Context, secret string) (registry.AppKey, error)
	Create(ctx context.Context, app registry.AppKey, req session.CreateRequest) (session.Created, error)
	Fork(ctx context.Context, id, bearer string) (session.Created, error)
}

// Control answers a session's token holder about the session, and ends it
// (session.Control).
type Control interface {
	Alive(ctx context.Context, id, tok string) (session.AliveStatus, error)
	Shutdown(ctx context.Context, id, tok string) (session.ShutdownStatus, error)
}

// Inbox takes what a session's token holder sends its agent (session.Inbox).
type Inbox interface {
	Authorize(ctx context.Context, id, tok string) (session.Session, error)
	SubmitEnv(ctx context.Context, sess session.Session, in session.EnvSubmission) (session.EnvReceipt, error)
	PostMessage(ctx context.Context, sess session.Session, req session.MessageRequest) (session.MessageReceipt, error)
	PresignAttachment(ctx context.Context, sess session.Session, name, contentType string, size int64) (session.AttachmentUpload, error)
}

// Handlers serve the routes of the services they are given: each service
// is optional, and Routes holds only the routes of those set.
type Handlers struct {
	Creator Creator
	Control Control
	Inbox   Inbox
	Log     *slog.Logger
}

// Routes is the route table of the app-facing session routes whose service
// is set, each answering CORS for allowedOrigins.
func (h *Handlers) Routes(allowedOrigins []string) []httpapi.Route {
	var rs []httpapi.Route
	add := func(method, pattern string, handler httpapi.Handler) {
		rs = append(rs, httpapi.Route{Method: method, Pattern: pattern, Handler: httpapi.CORS(allowedOrigins, method, handler), CORS: true})
	}
	if h.Creator != nil {
		add(http.MethodPost, routes.PathCreate, h.Create)
		add(http.MethodPost, routes.PathFork, h.Fork)
	}
	if h.Control != nil {
		add(http.MethodGet, routes.PathAlive, h.Alive)
		add(http.MethodPost, routes.PathShutdown, h.Shutdown)
	}
	if h.Inbox != nil {
		add(http.MethodPost, routes.PathEnv, h.SubmitEnv)
		add(http.MethodPost, routes.PathMessages, h.Messages)
		add(http.MethodPost, routes.PathAttachments, h.Attachments)
	}
	return rs
}

// Create serves POST /api/remote_agents/create.
func (h *Handlers) Create(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	app, err := h.Creator.Authenticate(ctx, httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in session.CreateRequest
	if err := httpapi.DecodeJSON(req, httpapi.MaxBodyBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	key, sent := httpapi.LookupHeader(req, "Idempotency-Key")
	if sent && key == "" {
		return httpapi.Error(ctx, h.Log, apierror.New(apierror.InvalidRequest, "Idempotency-Key must be 1 to %d printable ASCII characters.", session.MaxIdempotencyKeyLen)), nil
	}
	in.IdempotencyKey = key
	out, err := h.Creator.Create(ctx, app, in)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Fork serves POST /api/remote_agents/{id}/fork: a new agent from the
// agent's last checkpoint (its app key or session token), answered as
// create answers. No body.
func (h *Handlers) Fork(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	out, err := h.Creator.Fork(ctx, req.PathParameters["id"], httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Alive serves GET /api/remote_agents/{id}/alive.
func (h *Handlers) Alive(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	out, err := h.Control.Alive(ctx, req.PathParameters["id"], httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Shutdown serves POST /api/remote_agents/{id}/shutdown.
func (h *Handlers) Shutdown(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	out, err := h.Control.Shutdown(ctx, req.PathParameters["id"], httpapi.BearerToken(req))
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// SubmitEnv serves POST /api/remote_agents/{id}/env, the answer to the agent's
// request_env_variables: {"values": {"KEY": "value"}, "secrets": [{"key",
// "value", "persist"}], "saveToConfiguration": bool} (session.EnvSubmission).
func (h *Handlers) SubmitEnv(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authorize(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in session.EnvSubmission
	if err := httpapi.DecodeJSON(req, session.MaxEnvBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Inbox.SubmitEnv(ctx, sess, in)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Messages serves POST /api/remote_agents/{id}/messages: a user's text (with
// attachments), an answer to a question, or env values, queued to the agent's
// inbox once per client_message_id.
func (h *Handlers) Messages(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authorize(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in session.MessageRequest
	if err := httpapi.DecodeJSON(req, session.MaxMessageBytes+session.MaxEnvBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Inbox.PostMessage(ctx, sess, in)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
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
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in schema.AttachmentRequest
	if err := httpapi.DecodeJSON(req, 4096, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Inbox.PresignAttachment(ctx, sess, in.Name, in.ContentType, in.SizeBytes)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// authorize returns the session the request's token is for, the agent named
// in the path.
func (h *Handlers) authorize(ctx context.Context, req httpapi.Request) (session.Session, error) {
	return h.Inbox.Authorize(ctx, req.PathParameters["id"], httpapi.BearerToken(req))
}
