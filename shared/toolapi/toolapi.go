// Package toolapi serves the tool callback route the sandbox calls for the
// gateway-mediated tools:
//
//	POST /proliferate/{sessionId}/tools/{toolName}
//	Authorization: Bearer <sandbox token>
//	{"tool_call_id": "…", "args": {…}}
//
// It answers 200 with the tool's {success, result, data?} (with the header
// Idempotent-Replayed: true when the result was stored by an earlier request), or
// 202 {status: "pending"} for a long tool still running: post the same call again.
// Errors are the standard envelope, which on this route also carries
// success: false and the message as result, so that a tool wrapper can always
// hand the model `result`.
package toolapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/toolgate"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// ReplayedHeader marks a response whose result an earlier request stored.
const ReplayedHeader = "Idempotent-Replayed"

// maxBody bounds a callback body: the arguments plus the envelope around them.
const maxBody = toolspec.MaxArgsBytes + 1024

// Handlers serve the callback route.
type Handlers struct {
	Gate *toolgate.Service
	Log  *slog.Logger
}

// Routes is the route table of the tool callbacks.
func (h *Handlers) Routes() []httpapi.Route {
	return []httpapi.Route{{Method: http.MethodPost, Pattern: routes.PathToolCallback, Handler: h.Callback}}
}

// Callback serves POST /proliferate/{sessionId}/tools/{toolName}.
func (h *Handlers) Callback(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	in := toolgate.Request{
		SessionID: req.PathParameters["sessionId"],
		Tool:      req.PathParameters["toolName"],
		Token:     httpapi.BearerToken(req),
	}
	// Who calls comes first: no body is read for a caller that may not call.
	sess, err := h.Gate.Authenticate(ctx, in.SessionID, in.Token)
	if err != nil {
		return h.error(ctx, err), nil
	}
	var body callBody
	if err := httpapi.DecodeJSON(req, maxBody, &body); err != nil {
		return h.error(ctx, err), nil
	}
	in.ToolCallID, in.Args = body.ToolCallID, body.Args
	out, err := h.Gate.CallAs(ctx, sess, in)
	if err != nil {
		return h.error(ctx, err), nil
	}
	if out.Pending != nil {
		res := httpapi.JSON(http.StatusAccepted, out.Pending)
		res.Headers["Retry-After"] = "1"
		return res, nil
	}
	res := httpapi.JSON(http.StatusOK, out.Result)
	if out.Replayed {
		res.Headers[ReplayedHeader] = "true"
	}
	return res, nil
}

// callBody is a callback's body (the document's ToolCallRequest): the
// arguments are kept as sent, for the payload hash.
type callBody struct {
	ToolCallID string          `json:"tool_call_id"`
	Args       json.RawMessage `json:"args"`
}

// failure is the error envelope with the tool result fields beside it.
type failure struct {
	httpapi.Envelope
	Success bool   `json:"success"`
	Result  string `json:"result"`
}

func (h *Handlers) error(ctx context.Context, err error) httpapi.Response {
	res := httpapi.Error(ctx, h.Log, err)
	env := httpapi.EnvelopeOf(err)
	body := httpapi.JSON(env.Status, failure{Envelope: env, Success: false, Result: env.Message})
	res.Body = body.Body
	return res
}
