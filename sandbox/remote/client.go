package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/sandbox/retry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

type client struct {
	c     Config
	http  *http.Client
	retry retry.Policy
}

// newClient is the gateway client of a sandbox of c.
func newClient(c Config) *client {
	return &client{c: c, http: &http.Client{Timeout: 30 * time.Second}, retry: gatewayRetry}
}

// gatewayRetry is how the sandbox retries a channel call that failed in
// passing: a few times within seconds, since the heartbeat and inbox loop waits
// meanwhile and its next tick tries again anyway.
var gatewayRetry = retry.Policy{Retries: 4, Initial: 250 * time.Millisecond, Max: 4 * time.Second}

type authError struct{ status int }

func (e *authError) Error() string {
	return fmt.Sprintf("gateway refused the sandbox token (%d)", e.status)
}

// bootstrap exchanges the client's bootstrap code for the sandbox token. The
// code works once: a refused code (spent, expired, replaced by a later launch)
// is an *authError, never retried; a transport failure or 5xx is retried with
// the same code (an exchange whose answer was lost has spent it, and the
// retry is refused: the sandbox then stops, and its session fails).
func (cl *client) bootstrap(ctx context.Context) (string, error) {
	if cl.c.BootstrapCode == "" {
		return "", errors.New("sandbox: neither a sandbox token nor a bootstrap code")
	}
	withCode := *cl
	withCode.c.Token = cl.c.BootstrapCode
	var out sandboxwire.BootstrapResponse
	if err := withCode.do(ctx, http.MethodPost, sandboxwire.RouteBootstrap, struct{}{}, &out); err != nil {
		return "", fmt.Errorf("exchange the bootstrap code: %w", err)
	}
	if out.SandboxToken == "" {
		return "", errors.New("exchange the bootstrap code: the gateway sent no token")
	}
	return out.SandboxToken, nil
}

// Emit appends one event to the session.
func (cl *client) Emit(ctx context.Context, p sandboxwire.Payload) error {
	ev, err := sandboxwire.NewEvent(p)
	if err != nil {
		return err
	}
	ev.Data = cl.c.Secrets.JSON(ev.Data)
	// The id makes a retried append (its answer lost) append nothing twice.
	var out sandboxwire.EventsResponse
	return cl.do(ctx, http.MethodPost, sandboxwire.RouteEvents, sandboxwire.EventsRequest{ID: uuid.NewString(), Events: []sandboxwire.Event{ev}}, &out)
}

// Uploads asks for presigned upload URLs for a gateway tool call's files.
func (cl *client) Uploads(ctx context.Context, in sandboxwire.UploadsRequest) (sandboxwire.UploadsResponse, error) {
	var out sandboxwire.UploadsResponse
	err := cl.do(ctx, http.MethodPost, sandboxwire.RouteUploads, in, &out)
	return out, err
}

// ready reports ready, with the guardrails hash primed with and how the
// workspace was provisioned.
func (cl *client) ready(ctx context.Context, hash string, ws *sandboxwire.WorkspaceStatus) error {
	var orders sandboxwire.Orders
	return cl.do(ctx, http.MethodPost, sandboxwire.RouteStatus, sandboxwire.StatusReport{State: sandboxwire.Ready, GuardrailsHash: hash, Workspace: ws}, &orders)
}

func (cl *client) status(ctx context.Context, state sandboxwire.State, hash string, reason sandboxwire.Reason) error {
	var orders sandboxwire.Orders
	return cl.do(ctx, http.MethodPost, sandboxwire.RouteStatus, sandboxwire.StatusReport{State: state, GuardrailsHash: hash, Reason: reason}, &orders)
}

// do calls route, retrying transport failures, 429 and 5xx (retry.Do) within
// ctx. A refused token (401, 403) is an *authError and is never retried. Calls
// are not idempotent on the wire: an event whose answer was lost may be
// appended twice.
func (cl *client) do(ctx context.Context, method, route string, in, out any) error {
	return cl.doPath(ctx, method, sandboxwire.Prefix+url.PathEscape(cl.c.SessionID)+"/"+route, route, in, out)
}

// doPath is do for the route at path (below the gateway), named name in
// errors: the session's routes and the warm pool's (PoolPrefix).
func (cl *client) doPath(ctx context.Context, method, path, name string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s: %w", name, err)
		}
		body = b
	}
	_, err := retry.Do(ctx, cl.retry, func() (struct{}, error) {
		return struct{}{}, cl.once(ctx, method, path, name, body, out)
	})
	return err
}

// statusError is an answer other than 200 (and the 401 and 403 of
// authError).
type statusError struct {
	route  string
	status int
	body   []byte
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s: gateway answered %d: %s", e.route, e.status, e.body)
}

// once makes one attempt of a call, its error marked for retry.Do.
func (cl *client) once(ctx context.Context, method, path, route string, body []byte, out any) error {
	u := cl.c.Gateway + path
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return retry.Permanent(fmt.Errorf("%s: %w", route, err))
	}
	req.Header.Set("Authorization", "Bearer "+cl.c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := cl.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", route, err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(res.Body, sandboxwire.MaxResponseBytes))
	if err != nil {
		return fmt.Errorf("%s: %w", route, err)
	}
	if res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden {
		return retry.Permanent(&authError{status: res.StatusCode})
	}
	if res.StatusCode != http.StatusOK {
		return retry.Status(&statusError{route: route, status: res.StatusCode, body: raw}, res.StatusCode, res.Header)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return retry.Permanent(fmt.Errorf("%s: decode: %w", route, err))
	}
	return nil
}
