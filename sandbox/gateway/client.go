// Package gateway is the sandbox's client of the platform: the sandbox
// channel's routes under the gateway (sandboxwire.Prefix, and the warm pool's
// under sandboxwire.PoolPrefix), called with a bearer token and retried when
// they fail in passing. The run loop, job mode and the pool wait all take one.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/sandbox/retry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Client calls the sandbox channel of one session (or of none: a pool
// sandbox's routes are called by path) with one bearer token.
type Client struct {
	gateway string
	session string
	token   string
	secrets *redact.Secrets
	http    *http.Client
	retry   retry.Policy
}

// New is the client of the gateway at base URL gateway for session, with the
// bearer token (the sandbox token; "" before the bootstrap exchange). secrets
// (nil: none) are hidden from the events it appends.
func New(gateway, session, token string, secrets *redact.Secrets) *Client {
	return &Client{gateway: gateway, session: session, token: token, secrets: secrets,
		http: &http.Client{Timeout: 30 * time.Second}, retry: defaultRetry}
}

// defaultRetry is how the sandbox retries a channel call that failed in
// passing: a few times within seconds, since the heartbeat and inbox loop
// waits meanwhile and its next tick tries again anyway.
var defaultRetry = retry.Policy{Retries: 4, Initial: 250 * time.Millisecond, Max: 4 * time.Second}

// WithToken is a copy of cl that calls with the bearer token.
func (cl *Client) WithToken(token string) *Client {
	c := *cl
	c.token = token
	return &c
}

// WithSession is a copy of cl that calls session's routes.
func (cl *Client) WithSession(session string) *Client {
	c := *cl
	c.session = session
	return &c
}

// AuthError is the gateway's refusal of the bearer token (401, 403): never
// retried.
type AuthError struct {
	// Status is the answer's status.
	Status int
}

// Error says the token was refused, with the status.
func (e *AuthError) Error() string {
	return fmt.Sprintf("gateway refused the sandbox token (%d)", e.Status)
}

// StatusError is an answer other than 200 (and the 401 and 403 of
// AuthError).
type StatusError struct {
	// Route names the call; Status and Body are the answer's.
	Route  string
	Status int
	Body   []byte
}

// Error names the route, the status and the body.
func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: gateway answered %d: %s", e.Route, e.Status, e.Body)
}

// Bootstrap exchanges code, a bootstrap code, for the session's sandbox
// token. The code works once: a refused code (spent, expired, replaced by a
// later launch) is an *AuthError, never retried; a transport failure or 5xx
// is retried with the same code (an exchange whose answer was lost has spent
// it, and the retry is refused: the sandbox then stops, and its session
// fails).
func (cl *Client) Bootstrap(ctx context.Context, code string) (string, error) {
	if code == "" {
		return "", errors.New("sandbox: neither a sandbox token nor a bootstrap code")
	}
	var out sandboxwire.BootstrapResponse
	if err := cl.WithToken(code).Do(ctx, http.MethodPost, sandboxwire.RouteBootstrap, struct{}{}, &out); err != nil {
		return "", fmt.Errorf("exchange the bootstrap code: %w", err)
	}
	if out.SandboxToken == "" {
		return "", errors.New("exchange the bootstrap code: the gateway sent no token")
	}
	return out.SandboxToken, nil
}

// Emit appends one event to the session.
func (cl *Client) Emit(ctx context.Context, p sandboxwire.Payload) error {
	return cl.EmitAll(ctx, p)
}

// EmitAll appends events to the session in order, in as few requests as
// the per-append bound allows (one for most batches).
func (cl *Client) EmitAll(ctx context.Context, ps ...sandboxwire.Payload) error {
	for chunk := range slices.Chunk(ps, sandboxwire.MaxEventsPerAppend) {
		events := make([]sandboxwire.Event, 0, len(chunk))
		for _, p := range chunk {
			ev, err := sandboxwire.NewEvent(p)
			if err != nil {
				return err
			}
			ev.Data = cl.secrets.JSON(ev.Data)
			events = append(events, ev)
		}
		// The id makes a retried append (its answer lost) append nothing twice.
		var out sandboxwire.EventsResponse
		if err := cl.Do(ctx, http.MethodPost, sandboxwire.RouteEvents, sandboxwire.EventsRequest{ID: uuid.NewString(), Events: events}, &out); err != nil {
			return err
		}
	}
	return nil
}

// Uploads asks for presigned upload URLs for a gateway tool call's files.
func (cl *Client) Uploads(ctx context.Context, in sandboxwire.UploadsRequest) (sandboxwire.UploadsResponse, error) {
	var out sandboxwire.UploadsResponse
	err := cl.Do(ctx, http.MethodPost, sandboxwire.RouteUploads, in, &out)
	return out, err
}

// Ready reports ready, with the guardrails hash primed with and how the
// workspace was provisioned.
func (cl *Client) Ready(ctx context.Context, hash string, ws *sandboxwire.WorkspaceStatus) error {
	var orders sandboxwire.Orders
	return cl.Do(ctx, http.MethodPost, sandboxwire.RouteStatus, sandboxwire.StatusReport{State: sandboxwire.Ready, GuardrailsHash: hash, Workspace: ws}, &orders)
}

// Status reports the session's state, with the guardrails hash and the
// reason if any.
func (cl *Client) Status(ctx context.Context, state sandboxwire.State, hash string, reason sandboxwire.Reason) error {
	var orders sandboxwire.Orders
	return cl.Do(ctx, http.MethodPost, sandboxwire.RouteStatus, sandboxwire.StatusReport{State: state, GuardrailsHash: hash, Reason: reason}, &orders)
}

// Report reports the session's state and returns the platform's answer
// (whether to stop, how many viewers watch).
func (cl *Client) Report(ctx context.Context, state sandboxwire.State) (sandboxwire.Orders, error) {
	var orders sandboxwire.Orders
	err := cl.Do(ctx, http.MethodPost, sandboxwire.RouteStatus, sandboxwire.StatusReport{State: state}, &orders)
	return orders, err
}

// Do calls the session's route, retrying transport failures, 429 and 5xx
// (retry.Do) within ctx. A refused token (401, 403) is an *AuthError and is
// never retried; another answer but 200 is a *StatusError. Calls are not
// idempotent on the wire: an event whose answer was lost may be appended
// twice.
func (cl *Client) Do(ctx context.Context, method, route string, in, out any) error {
	return cl.DoPath(ctx, method, sandboxwire.Prefix+url.PathEscape(cl.session)+"/"+route, route, in, out)
}

// DoPath is Do for the route at path (below the gateway), named name in
// errors: the session's routes and the warm pool's (PoolPrefix).
func (cl *Client) DoPath(ctx context.Context, method, path, name string, in, out any) error {
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

// once makes one attempt of a call, its error marked for retry.Do.
func (cl *Client) once(ctx context.Context, method, path, route string, body []byte, out any) error {
	u := cl.gateway + path
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return retry.Permanent(fmt.Errorf("%s: %w", route, err))
	}
	req.Header.Set("Authorization", "Bearer "+cl.token)
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
		return retry.Permanent(&AuthError{Status: res.StatusCode})
	}
	if res.StatusCode != http.StatusOK {
		return retry.Status(&StatusError{Route: route, Status: res.StatusCode, Body: raw}, res.StatusCode, res.Header)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return retry.Permanent(fmt.Errorf("%s: decode: %w", route, err))
	}
	return nil
}
