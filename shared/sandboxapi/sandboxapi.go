// Package sandboxapi serves the sandbox channel, /sandbox/{sessionId}/… (see
// package sandboxwire for its bodies): the only way a sandbox touches platform
// state. Each handler authenticates the sandbox, then decodes the body (none is
// read for a caller that may not call), makes one call to
// sandboxchannel.Service, and encodes.
package sandboxapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/pool"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/sandboxchannel"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/viewerpush"
)

// Handlers serve the sandbox channel.
type Handlers struct {
	Channel *sandboxchannel.Service
	// Pool serves the warm pool's sandboxes (sandboxwire.PoolPrefix).
	Pool *pool.Service
	// Viewers serves the agents' viewers on the push channel and pushes
	// sandboxes' live events to them; nil: no live viewing.
	Viewers *viewerpush.Hub
	Log     *slog.Logger
}

// Routes is the sandbox channel's route table.
func (h *Handlers) Routes() []httpapi.Route {
	route := func(method, name string, fn httpapi.Handler) httpapi.Route {
		return httpapi.Route{Method: method, Pattern: routes.SandboxPath(name), Handler: fn}
	}
	return []httpapi.Route{
		route(http.MethodPost, sandboxwire.RouteBootstrap, h.Bootstrap),
		route(http.MethodGet, sandboxwire.RouteSpec, h.Spec),
		route(http.MethodPost, sandboxwire.RouteStatus, h.Status),
		route(http.MethodPost, sandboxwire.RouteHeartbeat, h.Heartbeat),
		route(http.MethodGet, sandboxwire.RouteInbox, h.Inbox),
		route(http.MethodPost, sandboxwire.RouteEvents, h.Events),
		route(http.MethodPost, sandboxwire.RouteDeltas, h.Deltas),
		route(http.MethodPost, sandboxwire.RouteUploads, h.Uploads),
		route(http.MethodPost, sandboxwire.RouteToolResults, h.ToolResults),
		route(http.MethodPost, sandboxwire.RouteCheckpointUploads, h.CheckpointUploads),
		route(http.MethodPost, sandboxwire.RouteCheckpointDownloads, h.CheckpointDownloads),
		route(http.MethodPost, sandboxwire.RouteCheckpoints, h.CommitCheckpoint),
		{Method: http.MethodPost, Pattern: routes.PoolPath(sandboxwire.RouteBootstrap), Handler: h.PoolBootstrap},
		{Method: http.MethodPost, Pattern: routes.PoolPath(sandboxwire.RouteHeartbeat), Handler: h.PoolHeartbeat},
	}
}

// PoolBootstrap serves POST /sandbox-pool/{sandboxId}/bootstrap: a pool
// sandbox's launch code, as the bearer, for its pool key. It reads no body.
func (h *Handlers) PoolBootstrap(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	out, err := h.Pool.Bootstrap(ctx, req.PathParameters["sandboxId"], httpapi.BearerToken(req))
	return h.answer(ctx, out, err), nil
}

// PoolHeartbeat serves POST /sandbox-pool/{sandboxId}/heartbeat: a pool
// sandbox's sign of life (idle or not), answered with its claim if any.
func (h *Handlers) PoolHeartbeat(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	// Who calls comes first: no body is read for a caller that may not call.
	sb, err := h.Pool.Authenticate(ctx, req.PathParameters["sandboxId"], httpapi.BearerToken(req))
	if err != nil {
		return h.answer(ctx, nil, err), nil
	}
	var in sandboxwire.PoolHeartbeat
	if req.Body != "" {
		if err := httpapi.DecodeJSON(req, sandboxwire.MaxPoolHeartbeatBytes, &in); err != nil {
			return httpapi.Error(ctx, h.Log, err), nil
		}
	}
	out, err := h.Pool.HeartbeatOf(ctx, sb, in)
	return h.answer(ctx, out, err), nil
}

// Bootstrap serves POST /sandbox/{sessionId}/bootstrap: the launch's
// one-time code, as the bearer, for the sandbox token. It reads no body.
func (h *Handlers) Bootstrap(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	out, err := h.Channel.Bootstrap(ctx, sessionID(req), httpapi.BearerToken(req))
	return h.answer(ctx, out, err), nil
}

// Spec serves GET /sandbox/{sessionId}/spec.
func (h *Handlers) Spec(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	out, err := h.Channel.Spec(ctx, sessionID(req), httpapi.BearerToken(req))
	return h.answer(ctx, out, err), nil
}

// Status serves POST /sandbox/{sessionId}/status.
func (h *Handlers) Status(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in sandboxwire.StatusReport
	if err := httpapi.DecodeJSON(req, sandboxwire.MaxStatusBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Channel.Report(ctx, sess, in)
	return h.answer(ctx, out, err), nil
}

// Heartbeat serves POST /sandbox/{sessionId}/heartbeat: its body, if any,
// is the sandbox's measure of its use.
func (h *Handlers) Heartbeat(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	var in sandboxwire.HeartbeatReport
	if req.Body != "" {
		// A body is read only for a sandbox that may send it.
		if _, err := h.authenticate(ctx, req); err != nil {
			return httpapi.Error(ctx, h.Log, err), nil
		}
		if err := httpapi.DecodeJSON(req, sandboxwire.MaxHeartbeatBytes, &in); err != nil {
			return httpapi.Error(ctx, h.Log, err), nil
		}
	}
	out, err := h.Channel.Heartbeat(ctx, sessionID(req), httpapi.BearerToken(req), in)
	return h.answer(ctx, out, err), nil
}

// Inbox serves GET /sandbox/{sessionId}/inbox?after=N.
func (h *Handlers) Inbox(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	after, err := strconv.ParseInt(req.QueryStringParameters[sandboxwire.InboxAfter], 10, 64)
	if err != nil {
		after = 0
	}
	out, err := h.Channel.Inbox(ctx, sessionID(req), httpapi.BearerToken(req), after)
	return h.answer(ctx, out, err), nil
}

// Events serves POST /sandbox/{sessionId}/events.
func (h *Handlers) Events(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in sandboxwire.EventsRequest
	if err := httpapi.DecodeJSON(req, sandboxwire.MaxEventsPerAppend*sandboxwire.MaxEventBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Channel.Append(ctx, sess, in)
	return h.answer(ctx, out, err), nil
}

// Deltas serves POST /sandbox/{sessionId}/deltas: live events, pushed to
// the agent's viewers and never stored one by one.
func (h *Handlers) Deltas(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in sandboxwire.DeltasRequest
	if err := httpapi.DecodeJSON(req, sandboxwire.MaxDeltasPerPost*sandboxwire.MaxDeltaBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	if h.Viewers == nil {
		return h.answer(ctx, struct{}{}, in.Validate()), nil
	}
	return h.answer(ctx, struct{}{}, h.Viewers.Deltas(ctx, sess, in)), nil
}

// Uploads serves POST /sandbox/{sessionId}/uploads.
func (h *Handlers) Uploads(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in sandboxwire.UploadsRequest
	if err := httpapi.DecodeJSON(req, sandboxwire.MaxUploadsRequestBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Channel.Uploads(ctx, sess, in)
	return h.answer(ctx, out, err), nil
}

// ToolResults serves POST /sandbox/{sessionId}/tool-results: the result of
// a workspace tool request an app made.
func (h *Handlers) ToolResults(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in sandboxwire.ToolResult
	if err := httpapi.DecodeJSON(req, sandboxwire.MaxToolResultBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Channel.ToolResult(ctx, sess, in)
	return h.answer(ctx, out, err), nil
}

// CheckpointUploads serves POST /sandbox/{sessionId}/checkpoints/uploads.
func (h *Handlers) CheckpointUploads(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in sandboxwire.CheckpointUploadsRequest
	if err := httpapi.DecodeJSON(req, maxChunkListBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Channel.CheckpointUploads(ctx, sess, in)
	return h.answer(ctx, out, err), nil
}

// CheckpointDownloads serves POST /sandbox/{sessionId}/checkpoints/downloads.
func (h *Handlers) CheckpointDownloads(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in sandboxwire.CheckpointDownloadsRequest
	if err := httpapi.DecodeJSON(req, maxChunkListBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Channel.CheckpointDownloads(ctx, sess, in)
	return h.answer(ctx, out, err), nil
}

// CommitCheckpoint serves POST /sandbox/{sessionId}/checkpoints.
func (h *Handlers) CommitCheckpoint(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in sandboxwire.CheckpointCommit
	if err := httpapi.DecodeJSON(req, 4<<10, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	out, err := h.Channel.CommitCheckpoint(ctx, sess, in)
	return h.answer(ctx, out, err), nil
}

// maxChunkListBytes bounds a request naming chunks: MaxChunksPerRequest of
// them, each a hash and a size.
const maxChunkListBytes = sandboxwire.MaxChunksPerRequest*128 + 1024

func (h *Handlers) answer(ctx context.Context, out any, err error) httpapi.Response {
	if err != nil {
		return httpapi.Error(ctx, h.Log, err)
	}
	return httpapi.JSON(http.StatusOK, out)
}

func sessionID(req httpapi.Request) string { return req.PathParameters["sessionId"] }

// authenticate returns the session the request's sandbox token is for, the
// one named in the path.
func (h *Handlers) authenticate(ctx context.Context, req httpapi.Request) (session.Session, error) {
	return h.Channel.Authenticate(ctx, sessionID(req), httpapi.BearerToken(req))
}

// Socket serves the push channel's WebSocket routes (routes.Sockets):
// $connect authenticates the sandbox (its sandbox token as the bearer of the
// upgrade request, its session as the sandboxwire.PushSessionParam query
// parameter) and records the connection; any answer but 200 refuses it.
// $disconnect forgets the connection.
func (h *Handlers) Socket(ctx context.Context, req httpapi.SocketRequest) (httpapi.SocketResponse, error) {
	conn := req.RequestContext.ConnectionID
	switch req.RequestContext.RouteKey {
	case "$connect":
		var err error
		if viewerpush.IsViewer(req) {
			if h.Viewers == nil {
				err = apierror.New(apierror.NotFound, "Live viewing is not configured: read the event stream.")
			} else {
				err = h.Viewers.Connect(req)
			}
		} else if id := req.QueryStringParameters[sandboxwire.PushPoolParam]; id != "" {
			err = h.Pool.Connect(ctx, id, socketBearer(req), conn)
		} else {
			err = h.Channel.Connect(ctx, req.QueryStringParameters[sandboxwire.PushSessionParam], socketBearer(req), conn)
		}
		if err != nil {
			if httpapi.Internal(err) {
				h.Log.ErrorContext(ctx, "push connect failed", slog.String("error", err.Error()))
			}
			return httpapi.SocketError(ctx, err), nil
		}
		return httpapi.SocketJSON(http.StatusOK, struct{}{}), nil
	case "$disconnect":
		viewer, err := false, error(nil)
		if h.Viewers != nil {
			viewer, err = h.Viewers.Disconnect(ctx, conn)
		}
		if !viewer && err == nil {
			err = h.Channel.Disconnect(ctx, conn)
		}
		if err != nil {
			h.Log.WarnContext(ctx, "push disconnect", slog.String("error", err.Error()))
		}
		return httpapi.SocketJSON(http.StatusOK, struct{}{}), nil
	case "$default":
		// A viewer's sync; sandboxes send nothing.
		if h.Viewers != nil {
			h.Viewers.Message(ctx, conn, req.Body)
		}
		return httpapi.SocketJSON(http.StatusOK, struct{}{}), nil
	}
	return httpapi.SocketError(ctx, apierror.New(apierror.NotFound, "The push channel has no route %q.", req.RequestContext.RouteKey)), nil
}

// socketBearer is the bearer token of a WebSocket upgrade request.
func socketBearer(req httpapi.SocketRequest) string {
	return httpapi.BearerToken(httpapi.Request{Headers: req.Headers})
}
