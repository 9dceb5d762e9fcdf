// Package client is a Go client of the Remote Agents API, the routes apps
// call (api/openapi.json describes them all):
//
//	c, _ := client.New("http://127.0.0.1:8080", appKey)
//	agent, _ := c.Create(ctx, client.CreateRequest{ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "Hello!"})
//	fmt.Println(agent.EmbedURL) // for an iframe
//	_, _ = c.SendMessage(ctx, agent.AgentID, agent.SessionToken, client.Message{Text: "What can you do?"})
//	for ev, err := range c.Events(ctx, agent.AgentID, agent.SessionToken) { … }
//	_, _ = c.Shutdown(ctx, agent.AgentID, agent.SessionToken)
//
// Attach uploads a file for a message, SubmitEnv answers an env.request,
// RunTool runs a workspace tool in the agent's sandbox.
//
// Create is exactly-once and waits for the agent: it sends an
// Idempotency-Key (one of its own unless given) and, when the server answers
// 408 agent_creation_timeout (the agent is still starting), asks again with
// the same key, which keeps waiting for the same agent (WithIdempotencyKey
// gives the key of the app's own). Answers that are
// retryable (service_unavailable, server_error) are retried after their
// Retry-After, a few times. SendMessage sends a client_message_id (one of its
// own unless given), so that its retries are queued once. Events resumes a
// dropped stream with Last-Event-ID: no event is lost or repeated.
//
// Errors the API answers are *Error, with the envelope's code, message and
// whether the request may be retried.
//
// The bodies are the API document's own types (package api/schema, generated
// from api/openapi.json), under the names below; the paths are the route
// table's (shared/routes), which a test holds the client to.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/remote-agents/remote-agents/api/schema"
)

// Error codes of the API (the envelope's error_code; the document's Error
// schema lists them all).
const (
	CodeInvalidRequest       = string(schema.ErrorErrorCodeInvalidRequest)
	CodeProjectNotFound      = string(schema.ErrorErrorCodeProjectNotFound)
	CodePersonaNotFound      = string(schema.ErrorErrorCodePersonaNotFound)
	CodeAgentNotFound        = string(schema.ErrorErrorCodeAgentNotFound)
	CodeAgentCreationTimeout = string(schema.ErrorErrorCodeAgentCreationTimeout)
	CodeInvalidToken         = string(schema.ErrorErrorCodeInvalidToken)
	CodeMissingToken         = string(schema.ErrorErrorCodeMissingToken)
	CodeForbidden            = string(schema.ErrorErrorCodeForbidden)
	CodeIdempotencyKeyReused = string(schema.ErrorErrorCodeIdempotencyKeyReused)
	CodePayloadTooLarge      = string(schema.ErrorErrorCodePayloadTooLarge)
	CodeNotFound             = string(schema.ErrorErrorCodeNotFound)
	CodeServerError          = string(schema.ErrorErrorCodeServerError)
	CodeServiceUnavailable   = string(schema.ErrorErrorCodeServiceUnavailable)
	CodeGuardrailsMissing    = string(schema.ErrorErrorCodeGuardrailsMissing)
	CodeAgentNotAlive        = string(schema.ErrorErrorCodeAgentNotAlive)
	CodeModelUnavailable     = string(schema.ErrorErrorCodeModelUnavailable)
	CodeAgentTypeNotFound    = string(schema.ErrorErrorCodeAgentTypeNotFound)
	CodeAgentTypeExists      = string(schema.ErrorErrorCodeAgentTypeExists)
	CodeWorkspaceDisabled    = string(schema.ErrorErrorCodeWorkspaceDisabled)
	CodeToolNotFound         = string(schema.ErrorErrorCodeToolNotFound)
	CodeToolNotEnabled       = string(schema.ErrorErrorCodeToolNotEnabled)
	// CodeQuotaExceeded: the app is at a quota (live agents, creates a
	// minute, an agent's open streams); retryable after RetryAfter.
	CodeQuotaExceeded = string(schema.ErrorErrorCodeQuotaExceeded)
	// CodeBudgetExceeded: the app spent its daily model budget; retryable
	// after RetryAfter (the next UTC day).
	CodeBudgetExceeded = string(schema.ErrorErrorCodeBudgetExceeded)
)

// Error is an error the API answered: the standard envelope.
type Error struct {
	// Status is the HTTP status.
	Status int `json:"status"`
	// Code is machine-readable (the Code constants).
	Code    string `json:"error_code"`
	Message string `json:"message"`
	// Retryable: the same request may be sent again unchanged.
	Retryable bool `json:"retryable"`
	// RetryAfterSeconds, when positive, is how long to wait before retrying.
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("remote agents: %d %s: %s", e.Status, e.Code, e.Message)
}

// RetryAfter is how long to wait before retrying.
func (e *Error) RetryAfter() time.Duration { return time.Duration(e.RetryAfterSeconds) * time.Second }

// IsCode reports whether err is an *Error with code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Client calls one Remote Agents deployment.
type Client struct {
	base       *url.URL
	appKey     string
	hc         *http.Client
	maxRetries int
	// sleep waits between polls and reconnects; notify is told each wait
	// between retries (tests replace both).
	sleep  func(context.Context, time.Duration) error
	notify func(time.Duration)
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends the requests with hc (default http.DefaultClient).
// Leave its Timeout zero and bound calls with contexts: a Timeout also cuts
// event streams, and must outlast the server's creation timeout.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithMaxRetries sets how many times a request answered a retryable error
// (or a dropped event stream that does not come back) is tried again before
// the error is returned; default 5. A create still starting (408) is asked
// again as long as the context allows, this many times per other error.
func WithMaxRetries(n int) Option { return func(c *Client) { c.maxRetries = max(n, 0) } }

// New returns a client of the deployment at baseURL (e.g.
// http://127.0.0.1:8080 for make dev) with the app's key, which Create uses;
// the other calls use the agent's session token.
func New(baseURL, appKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("remote agents: base URL %q is not an http(s) URL", baseURL)
	}
	c := &Client{base: u, appKey: appKey, hc: http.DefaultClient, maxRetries: 5, sleep: sleep}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// The API's bodies are the document's schemas (package schema, generated
// from api/openapi.json); these names are the client's for them.
type (
	// Features are the embed view's optional parts.
	Features = schema.Features
	// CreateRequest asks for an agent.
	CreateRequest = schema.CreateRequest
	// TaskContext is the repository, branch and pull request an agent works
	// on: its repository is cloned into the workspace before ready (as the
	// agent type's repo_source says).
	TaskContext = schema.TaskContext
	// Workspace is how an agent's workspace was provisioned before ready:
	// Status "ready", "degraded" (with Warnings: a clone or setup command
	// failed) or "none".
	Workspace = schema.WorkspaceStatus
	// Agent is a created, ready agent: its EmbedURL goes in an iframe, its
	// SessionToken is the bearer of its routes (keep it secret).
	Agent = schema.Created
)

// CreateOption adjusts a Create.
type CreateOption func(*schema.CreateAgentParams)

// WithIdempotencyKey makes the create exactly-once across calls with the same
// key; without it, Create makes one for its own retries.
func WithIdempotencyKey(key string) CreateOption {
	return func(p *schema.CreateAgentParams) { p.IdempotencyKey = key }
}

// Create creates an agent and waits until it is ready.
func (c *Client) Create(ctx context.Context, req CreateRequest, opts ...CreateOption) (*Agent, error) {
	var params schema.CreateAgentParams
	for _, o := range opts {
		o(&params)
	}
	key := params.IdempotencyKey
	if key == "" {
		key = "client-" + randomID()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("remote agents: encode create: %w", err)
	}
	var out Agent
	err = c.retry(ctx, true, func() error {
		return c.do(ctx, http.MethodPost, pathCreate, c.appKey, body, &out, "Idempotency-Key", key)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

type (
	// Usage is what an agent's model calls used so far.
	Usage = schema.Usage
	// AliveStatus says whether an agent is still active: its State
	// (provisioning, ready, working, idle, ending, ended, failed, or unknown:
	// no such agent), usage and, once it has been ready, its Workspace.
	AliveStatus = schema.AliveStatus
)

// Alive reports whether the agent is still active (not ended).
func (c *Client) Alive(ctx context.Context, agentID, token string) (*AliveStatus, error) {
	var out AliveStatus
	err := c.retry(ctx, false, func() error {
		return c.do(ctx, http.MethodGet, expand(pathAlive, agentID), token, nil, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ShutdownStatus answers Shutdown: shutdown_initiated or already_terminated.
type ShutdownStatus = schema.ShutdownStatus

// Shutdown shuts the agent down gracefully; an ended agent is no error.
func (c *Client) Shutdown(ctx context.Context, agentID, token string) (*ShutdownStatus, error) {
	var out ShutdownStatus
	err := c.retry(ctx, false, func() error {
		return c.do(ctx, http.MethodPost, expand(pathShutdown, agentID), token, nil, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

type (
	// Answer picks an option of an agent.question event.
	Answer = schema.Answer
	// Attachment is an uploaded file to attach to a message.
	Attachment = schema.Attachment
	// Message is what a user sends an agent: Text (with Attachments), an
	// Answer, or EnvValues. Its ClientMessageID makes it exactly-once; empty:
	// SendMessage makes one for its own retries.
	Message = schema.MessageRequest
	// MessageReceipt says the message is queued (or env values submitted).
	MessageReceipt = schema.MessageReceipt
)

// SendMessage sends the agent a message.
func (c *Client) SendMessage(ctx context.Context, agentID, token string, msg Message) (*MessageReceipt, error) {
	if msg.ClientMessageID == "" && msg.EnvValues == nil {
		msg.ClientMessageID = "client-" + randomID()
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("remote agents: encode message: %w", err)
	}
	var out MessageReceipt
	err = c.retry(ctx, false, func() error {
		return c.do(ctx, http.MethodPost, expand(pathMessages, agentID), token, body, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Attach uploads a file of size bytes from body for a message: it asks for an
// upload URL, PUTs the file there, and returns the Attachment to put in a
// Message's Attachments. The agent needs the file_upload feature.
func (c *Client) Attach(ctx context.Context, agentID, token, name, contentType string, size int64, body io.Reader) (Attachment, error) {
	in, err := json.Marshal(schema.AttachmentRequest{Name: name, SizeBytes: size, ContentType: contentType})
	if err != nil {
		return Attachment{}, fmt.Errorf("remote agents: encode attachment: %w", err)
	}
	var up schema.PresignedUpload
	err = c.retry(ctx, false, func() error {
		return c.do(ctx, http.MethodPost, expand(pathAttachments, agentID), token, in, &up)
	})
	if err != nil {
		return Attachment{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, up.UploadURL, body)
	if err != nil {
		return Attachment{}, fmt.Errorf("remote agents: upload %s: %w", name, err)
	}
	for k, v := range up.UploadHeaders {
		req.Header.Set(k, v)
	}
	req.ContentLength = size // signed: exactly this many bytes
	res, err := c.hc.Do(req)
	if err != nil {
		return Attachment{}, fmt.Errorf("remote agents: upload %s: %w", name, err)
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return Attachment{}, fmt.Errorf("remote agents: upload %s: the object store answered %d: %s", name, res.StatusCode, raw)
	}
	return Attachment{Key: up.Key, Name: name, SizeBytes: size, ContentType: contentType}, nil
}

type (
	// EnvSecret is one env value of an EnvSubmission; Persist (when set)
	// says whether it is kept for the session's configuration.
	EnvSecret = schema.EnvSecret
	// EnvSubmission answers an env.request event: Values, or Secrets with a
	// per-key Persist, and SaveToConfiguration for the keys that do not say.
	EnvSubmission = schema.EnvSubmission
	// EnvReceipt names the keys submitted and those persisted (never values).
	EnvReceipt = schema.EnvReceipt
)

// SubmitEnv sends the agent the env values it asked for (an env.request
// event).
func (c *Client) SubmitEnv(ctx context.Context, agentID, token string, env EnvSubmission) (*EnvReceipt, error) {
	body, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("remote agents: encode env: %w", err)
	}
	var out EnvReceipt
	if err := c.do(ctx, http.MethodPost, expand(pathEnv, agentID), token, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ToolResult is a workspace tool's answer: its output (at most 64 KiB) and
// whether the tool failed.
type ToolResult = schema.WorkspaceToolResult

// RunTool runs workspace tool (read, ls, bash, git…) with args (a value
// that encodes as a JSON object, e.g. map[string]any{"path": "README.md"})
// in the agent's sandbox and returns its result. It names the request with an
// Idempotency-Key of its own, so that the tool runs once however often the
// request is sent: while the server answers 202 pending (the tool still
// runs) it asks again with the same key, after the server's Retry-After,
// until the result is there or ctx ends. A tool the agent's type does not
// enable is *Error tool_not_enabled.
func (c *Client) RunTool(ctx context.Context, agentID, token, tool string, args any) (*ToolResult, error) {
	body, err := json.Marshal(struct {
		Args any `json:"args"`
	}{args})
	if err != nil {
		return nil, fmt.Errorf("remote agents: encode %s arguments: %w", tool, err)
	}
	key := "tool-" + randomID()
	path := expand(pathTool, agentID, tool)
	for {
		// A result, or (202) schema.WorkspaceToolPending: the two share
		// request_id.
		var out struct {
			ToolResult
			Status            schema.WorkspaceToolPendingStatus `json:"status"`
			RetryAfterSeconds int64                             `json:"retry_after_seconds"`
		}
		err := c.retry(ctx, false, func() error {
			return c.do(ctx, http.MethodPost, path, token, body, &out, "Idempotency-Key", key)
		})
		if err != nil {
			return nil, err
		}
		if out.Status != schema.WorkspaceToolPendingStatusPending {
			return &out.ToolResult, nil
		}
		if err := c.sleep(ctx, retryWait(time.Duration(out.RetryAfterSeconds)*time.Second, 0)); err != nil {
			return nil, err
		}
	}
}

// retry calls f until it succeeds, fails for good, or maxRetries retryable
// errors passed; waitCreation also asks again, without counting, after each
// agent_creation_timeout. The waits are cenkalti/backoff's, each what
// retryWait says for the last answer.
func (c *Client) retry(ctx context.Context, waitCreation bool, f func() error) error {
	retries := 0
	var last error
	var wait time.Duration
	op := func() (struct{}, error) {
		last = f()
		var e *Error
		if last == nil || !errors.As(last, &e) || !e.Retryable {
			return struct{}{}, backoff.Permanent(last)
		}
		if !waitCreation || e.Code != CodeAgentCreationTimeout {
			if retries >= c.maxRetries {
				return struct{}{}, backoff.Permanent(last)
			}
			retries++
		}
		wait = retryWait(e.RetryAfter(), retries)
		return struct{}{}, last
	}
	_, err := backoff.Retry(ctx, op,
		backoff.WithBackOff(lastWait{&wait}),
		backoff.WithMaxElapsedTime(0), // ctx bounds the time
		backoff.WithNotify(func(_ error, d time.Duration) {
			if c.notify != nil {
				c.notify(d)
			}
		}))
	if cause := context.Cause(ctx); err != nil && cause != nil && errors.Is(err, cause) && !errors.Is(last, cause) {
		return errors.Join(last, err) // ended while waiting to retry
	}
	return err
}

// lastWait is a backoff.BackOff that waits what the last answer asked.
type lastWait struct{ next *time.Duration }

func (w lastWait) NextBackOff() time.Duration { return *w.next }
func (lastWait) Reset()                       {}

// retryWait is the server's Retry-After, or a short wait growing with retries.
func retryWait(after time.Duration, retries int) time.Duration {
	if after > 0 {
		return after
	}
	return min(time.Duration(1<<min(retries, 5))*100*time.Millisecond, 5*time.Second)
}

// do sends one request with bearer and decodes a 2xx JSON answer into out.
func (c *Client) do(ctx context.Context, method, path, bearer string, body []byte, out any, headers ...string) error {
	res, err := c.send(ctx, method, path, bearer, body, headers...)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("remote agents: read %s %s: %w", method, path, err)
	}
	if res.StatusCode/100 != 2 {
		return decodeError(res, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("remote agents: decode %s %s: %w", method, path, err)
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path, bearer string, body []byte, headers ...string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, rd)
	if err != nil {
		return nil, fmt.Errorf("remote agents: %w", err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("remote agents: %s %s: %w", method, path, err)
	}
	return res, nil
}

// decodeError reads the error envelope of a non-2xx answer; an answer that
// is not one (a proxy's page) becomes an Error with the status alone.
func decodeError(res *http.Response, raw []byte) error {
	e := &Error{}
	if err := json.Unmarshal(raw, e); err != nil || e.Code == "" {
		e = &Error{Code: CodeServerError, Message: strings.TrimSpace(string(raw)),
			Retryable: res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests}
		if len(e.Message) > 200 {
			e.Message = e.Message[:200]
		}
	}
	e.Status = res.StatusCode
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 && e.RetryAfterSeconds == 0 {
		e.RetryAfterSeconds = s
	}
	return e
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
