package e2bapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/e2b"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// MaxBodyBytes bounds a request body (a create's metadata and envVars are
// the largest).
const MaxBodyBytes = 256 << 10

// Handlers serve the sandbox API's routes.
type Handlers struct {
	svc *Service
	log *slog.Logger
}

// NewHandlers returns the handlers of svc.
func NewHandlers(svc *Service, log *slog.Logger) *Handlers {
	return &Handlers{svc: svc, log: log}
}

// Routes is the sandbox API's route table. Servers call it, not browsers:
// no CORS.
func (h *Handlers) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodPost, Pattern: routes.PathE2BSandboxes, Handler: h.Create},
		{Method: http.MethodPost, Pattern: routes.PathE2BSandboxesV2, Handler: h.Create},
		{Method: http.MethodGet, Pattern: routes.PathE2BSandboxesV2, Handler: h.List},
		{Method: http.MethodGet, Pattern: routes.PathE2BSandbox, Handler: h.Info},
		{Method: http.MethodDelete, Pattern: routes.PathE2BSandbox, Handler: h.Kill},
		{Method: http.MethodPost, Pattern: routes.PathE2BConnect, Handler: h.Connect},
		{Method: http.MethodPost, Pattern: routes.PathE2BConnectV2, Handler: h.Connect},
		{Method: http.MethodPost, Pattern: routes.PathE2BTimeout, Handler: h.SetTimeout},
		{Method: http.MethodPost, Pattern: routes.PathE2BPause, Handler: h.Pause},
		{Method: http.MethodGet, Pattern: routes.PathE2BMetrics, Handler: h.Metrics},
	}
}

// caller authenticates the request's X-API-Key (an app key).
func (h *Handlers) caller(ctx context.Context, req httpapi.Request) (Caller, error) {
	key := httpapi.Header(req, "X-API-Key")
	if key == "" {
		return Caller{}, apierror.New(apierror.MissingToken, "An API key is required: X-API-Key.")
	}
	return h.svc.Authenticate(ctx, key)
}

// MaxBodyDepth bounds how deep a body nests (the SDKs' go 4 deep).
const MaxBodyDepth = 16

// decode reads an optional JSON body into v. Fields the SDKs send that the
// platform has no use for (network, mcp, secure…) are ignored, within
// MaxBodyDepth.
func decode(req httpapi.Request, v any) error {
	raw, err := httpapi.Body(req, MaxBodyBytes)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if depth(raw) > MaxBodyDepth {
		return apierror.New(apierror.InvalidRequest, "The body nests deeper than %d levels.", MaxBodyDepth)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return apierror.New(apierror.InvalidRequest, "The body is not the JSON this route takes.")
	}
	return nil
}

// depth is how deep raw's arrays and objects nest, strings skipped.
func depth(raw []byte) int {
	deepest, d, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			d++
			deepest = max(deepest, d)
		case c == ']' || c == '}':
			d--
		}
	}
	return deepest
}

// fail answers err as the SDKs read errors: {"code": status, "message"},
// with the platform's error code beside them, and Retry-After where the
// envelope has one.
func (h *Handlers) fail(ctx context.Context, err error) (httpapi.Response, error) {
	res := httpapi.Error(ctx, h.log, err)
	env := httpapi.EnvelopeOf(err)
	body, _ := json.Marshal(e2b.Error{Code: env.Status, Message: env.Message, ErrorCode: string(env.ErrorCode)})
	res.Body = string(body)
	return res, nil
}

func noContent() httpapi.Response {
	return httpapi.Response{StatusCode: http.StatusNoContent, Headers: map[string]string{"Cache-Control": "no-store"}}
}

// Create serves POST /e2b/sandboxes and /e2b/v2/sandboxes: 201 and the
// sandbox, once its envd is up.
func (h *Handlers) Create(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	c, err := h.caller(ctx, req)
	if err != nil {
		return h.fail(ctx, err)
	}
	var in e2b.NewSandbox
	if err := decode(req, &in); err != nil {
		return h.fail(ctx, err)
	}
	out, err := h.svc.Create(ctx, c, in)
	if err != nil {
		return h.fail(ctx, err)
	}
	return httpapi.JSON(http.StatusCreated, out), nil
}

// Connect serves POST /e2b/sandboxes/{id}/connect and its /v2: 200 for a
// running sandbox, 201 for one it resumed.
func (h *Handlers) Connect(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	c, err := h.caller(ctx, req)
	if err != nil {
		return h.fail(ctx, err)
	}
	var in e2b.ConnectRequest
	if err := decode(req, &in); err != nil {
		return h.fail(ctx, err)
	}
	out, resumed, err := h.svc.Connect(ctx, c, req.PathParameters["id"], in)
	if err != nil {
		return h.fail(ctx, err)
	}
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	return httpapi.JSON(status, out), nil
}

// Info serves GET /e2b/sandboxes/{id}.
func (h *Handlers) Info(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	c, err := h.caller(ctx, req)
	if err != nil {
		return h.fail(ctx, err)
	}
	out, err := h.svc.Info(ctx, c, req.PathParameters["id"])
	if err != nil {
		return h.fail(ctx, err)
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// Kill serves DELETE /e2b/sandboxes/{id}: 204, or 404 for a sandbox that
// was over already.
func (h *Handlers) Kill(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	c, err := h.caller(ctx, req)
	if err != nil {
		return h.fail(ctx, err)
	}
	id := req.PathParameters["id"]
	killed, err := h.svc.Kill(ctx, c, id)
	if err == nil && !killed {
		err = notFound(id)
	}
	if err != nil {
		return h.fail(ctx, err)
	}
	return noContent(), nil
}

// SetTimeout serves POST /e2b/sandboxes/{id}/timeout: 204.
func (h *Handlers) SetTimeout(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	c, err := h.caller(ctx, req)
	if err != nil {
		return h.fail(ctx, err)
	}
	var in e2b.TimeoutRequest
	if err := decode(req, &in); err != nil {
		return h.fail(ctx, err)
	}
	if err := h.svc.SetTimeout(ctx, c, req.PathParameters["id"], in); err != nil {
		return h.fail(ctx, err)
	}
	return noContent(), nil
}

// Pause serves POST /e2b/sandboxes/{id}/pause: 204 once paused, 409 for a
// sandbox paused already. The body ({"memory"}) is read and not kept: a
// pause keeps the files and the agent's state, never the memory.
func (h *Handlers) Pause(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	c, err := h.caller(ctx, req)
	if err != nil {
		return h.fail(ctx, err)
	}
	var in e2b.PauseRequest
	if err := decode(req, &in); err != nil {
		return h.fail(ctx, err)
	}
	id := req.PathParameters["id"]
	paused, err := h.svc.Pause(ctx, c, id)
	if err == nil && !paused {
		err = apierror.New(apierror.AlreadyPaused, "Sandbox %q is paused already.", id)
	}
	if err != nil {
		return h.fail(ctx, err)
	}
	return noContent(), nil
}

// Metrics serves GET /e2b/sandboxes/{id}/metrics: none kept (an empty
// list), for a sandbox there is.
func (h *Handlers) Metrics(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	c, err := h.caller(ctx, req)
	if err != nil {
		return h.fail(ctx, err)
	}
	if _, err := h.svc.Info(ctx, c, req.PathParameters["id"]); err != nil {
		return h.fail(ctx, err)
	}
	return httpapi.JSON(http.StatusOK, []struct{}{}), nil
}

// List serves GET /e2b/v2/sandboxes: a page of the app's running and
// paused sandboxes, with the next page's token in X-Next-Token.
func (h *Handlers) List(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	c, err := h.caller(ctx, req)
	if err != nil {
		return h.fail(ctx, err)
	}
	q, err := url.ParseQuery(req.RawQueryString)
	if err != nil {
		return h.fail(ctx, apierror.New(apierror.InvalidRequest, "The query does not parse."))
	}
	f, err := e2b.ParseListFilter(q)
	if err != nil {
		return h.fail(ctx, apierror.New(apierror.InvalidRequest, "%s.", err.Error()))
	}
	out, next, err := h.svc.List(ctx, c, f)
	if err != nil {
		return h.fail(ctx, err)
	}
	res := httpapi.JSON(http.StatusOK, out)
	if next != "" {
		res.Headers["X-Next-Token"] = next
	}
	return res, nil
}
