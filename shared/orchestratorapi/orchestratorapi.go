// Package orchestratorapi serves the orchestrator's /internal/ routes: jobs (create,
// read, logs, outputs, cancel) and agent profiles. Only the orchestrator may
// call them: API Gateway's IAM authorization checks the request's SigV4
// signature (the dev server does it itself), and every handler checks that
// the caller it passes is the orchestrator's role. Then the mandatory
// headers, before any body is read; then one call to the job service.
package orchestratorapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/sigv4"
)

// Handlers serve the /internal/ routes.
type Handlers struct {
	Jobs *job.Service
	// Caller is the ARN of the one IAM role allowed (the orchestrator's).
	Caller string
	Log    *slog.Logger
}

// Routes is the route table of the /internal/ routes.
func (h *Handlers) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodPost, Pattern: routes.PathJobs, Handler: h.guard(h.create)},
		{Method: http.MethodGet, Pattern: routes.PathJob, Handler: h.guard(h.get)},
		{Method: http.MethodGet, Pattern: routes.PathJobLogs, Handler: h.guard(h.logs)},
		{Method: http.MethodGet, Pattern: routes.PathJobOutputs, Handler: h.guard(h.outputs)},
		{Method: http.MethodPost, Pattern: routes.PathJobCancel, Handler: h.guard(h.cancel)},
		{Method: http.MethodPost, Pattern: routes.PathJobRetry, Handler: h.guard(h.retry)},
		{Method: http.MethodPut, Pattern: routes.PathAgentProfile, Handler: h.guard(h.putProfile)},
		{Method: http.MethodGet, Pattern: routes.PathAgentProfile, Handler: h.guard(h.getProfile)},
		{Method: http.MethodGet, Pattern: routes.PathAgentProfiles, Handler: h.guard(h.listProfiles)},
	}
}

type handler func(ctx context.Context, req httpapi.Request, hd job.Headers) (httpapi.Response, error)

// guard checks the caller, then the mandatory headers, then calls next.
func (h *Handlers) guard(next handler) httpapi.Handler {
	return func(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
		hd, err := h.Admit(req)
		if err != nil {
			return httpapi.Error(ctx, h.Log, err), nil
		}
		res, err := next(ctx, req, hd)
		if err != nil {
			return httpapi.Error(ctx, h.Log, err), nil
		}
		return res, nil
	}
}

// Admit checks that the orchestrator calls, with a signature that covers the
// identity headers, and reads them: what every /internal/ route does first.
func (h *Handlers) Admit(req httpapi.Request) (job.Headers, error) {
	if !h.callerAllowed(req) {
		return job.Headers{}, apierror.New(apierror.Forbidden, "Only the orchestrator may call this route.")
	}
	// The identity headers say whose job it is: the signature must cover
	// them, or anyone who can replay one signed request could name another
	// identity.
	if unsigned := sigv4.Unsigned(httpapi.Header(req, "Authorization"), job.MandatoryHeaders, func(n string) bool { return httpapi.Header(req, n) != "" }); len(unsigned) > 0 {
		return job.Headers{}, apierror.New(apierror.Forbidden, "The request's signature must cover %s (SigV4 SignedHeaders).", strings.Join(unsigned, ", "))
	}
	hd, missing := job.ReadHeaders(func(n string) string { return httpapi.Header(req, n) })
	if len(missing) > 0 {
		return job.Headers{}, &apierror.Error{Code: apierror.MissingHeaders,
			Message: "Missing mandatory headers: " + strings.Join(missing, ", ") + ".",
			Details: map[string]any{"missing": missing}}
	}
	return hd, nil
}

// callerAllowed reports whether API Gateway's IAM authorizer passed the
// orchestrator's role: the role itself, or a session of it.
func (h *Handlers) callerAllowed(req httpapi.Request) bool {
	a := req.RequestContext.Authorizer
	if h.Caller == "" || a == nil || a.IAM == nil {
		return false
	}
	return SameRole(h.Caller, a.IAM.UserARN)
}

// SameRole reports whether caller (an IAM role ARN, or an STS assumed-role
// session ARN) is the role roleARN (arn:aws:iam::<account>:role/<path/>name).
func SameRole(roleARN, caller string) bool {
	if caller == "" {
		return false
	}
	if caller == roleARN {
		return true
	}
	// arn:aws:sts::<account>:assumed-role/<name>/<session>
	p := strings.SplitN(caller, ":", 6)
	r := strings.SplitN(roleARN, ":", 6)
	if len(p) != 6 || len(r) != 6 || p[2] != "sts" || r[2] != "iam" || p[1] != r[1] || p[4] != r[4] || p[4] == "" {
		return false
	}
	parts := strings.Split(p[5], "/")
	if len(parts) != 3 || parts[0] != "assumed-role" || !strings.HasPrefix(r[5], "role/") {
		return false
	}
	name := r[5][strings.LastIndex(r[5], "/")+1:]
	return name == parts[1]
}

func (h *Handlers) create(ctx context.Context, req httpapi.Request, hd job.Headers) (httpapi.Response, error) {
	body, err := httpapi.Body(req, job.MaxCreateBytes)
	if err != nil {
		return httpapi.Response{}, err
	}
	in, msg := job.ParseCreate(body)
	if msg != "" {
		return httpapi.Response{}, apierror.New(apierror.InvalidRequest, "%s", msg)
	}
	j, replayed, err := h.Jobs.Create(ctx, hd, in)
	if err != nil {
		return httpapi.Response{}, err
	}
	return h.made(j, replayed), nil
}

func (h *Handlers) get(ctx context.Context, req httpapi.Request, hd job.Headers) (httpapi.Response, error) {
	j, err := h.Jobs.Get(ctx, hd, req.PathParameters["id"])
	if err != nil {
		return httpapi.Response{}, err
	}
	return httpapi.JSON(http.StatusOK, h.Jobs.Live(ctx, j)), nil
}

// outputsBody is GET /internal/jobs/{id}/outputs's answer.
type outputsBody struct {
	Outputs []job.Output `json:"outputs"`
}

func (h *Handlers) outputs(ctx context.Context, req httpapi.Request, hd job.Headers) (httpapi.Response, error) {
	out, err := h.Jobs.Outputs(ctx, hd, req.PathParameters["id"])
	if err != nil {
		return httpapi.Response{}, err
	}
	return httpapi.JSON(http.StatusOK, outputsBody{Outputs: out}), nil
}

func (h *Handlers) cancel(ctx context.Context, req httpapi.Request, hd job.Headers) (httpapi.Response, error) {
	j, err := h.Jobs.Cancel(ctx, hd, req.PathParameters["id"])
	if err != nil {
		return httpapi.Response{}, err
	}
	return httpapi.JSON(http.StatusOK, job.ViewOf(j, h.Jobs.Now())), nil
}

// made answers a job a call made: 201, or 200 with Idempotent-Replayed
// when an earlier call made it.
func (h *Handlers) made(j job.Job, replayed bool) httpapi.Response {
	if replayed {
		res := httpapi.JSON(http.StatusOK, job.ViewOf(j, h.Jobs.Now()))
		res.Headers["Idempotent-Replayed"] = "true"
		return res
	}
	return httpapi.JSON(http.StatusCreated, job.ViewOf(j, h.Jobs.Now()))
}

// retry re-runs a failed or cancelled job's plan step: 201 with the new
// attempt, 200 (Idempotent-Replayed) when this retry was made already.
func (h *Handlers) retry(ctx context.Context, req httpapi.Request, hd job.Headers) (httpapi.Response, error) {
	j, replayed, err := h.Jobs.Retry(ctx, hd, req.PathParameters["id"])
	if err != nil {
		return httpapi.Response{}, err
	}
	return h.made(j, replayed), nil
}

// MaxLogBytes bounds the whole log one answer carries (a Lambda response is
// at most 6 MB); a longer log is read from its reference.
const MaxLogBytes = 4 << 20

// logLine is one line of the NDJSON log.
type logLine struct {
	Seq  int64          `json:"seq"`
	Type string         `json:"type"`
	At   string         `json:"at"`
	Data map[string]any `json:"data,omitempty"`
}

// Headers of a log answer.
const (
	// HeaderLogCursor is the cursor to resume after (query parameter after).
	HeaderLogCursor = "X-Log-Cursor"
	// HeaderJobStatus is the job's status when the log was read.
	HeaderJobStatus = "X-Job-Status"
)

func (h *Handlers) logs(ctx context.Context, req httpapi.Request, hd job.Headers) (httpapi.Response, error) {
	var after int64
	if v := req.QueryStringParameters["after"]; v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return httpapi.Response{}, apierror.New(apierror.InvalidRequest, "after must be a cursor a previous read returned (%s).", HeaderLogCursor)
		}
		after = n
	}
	var wait time.Duration
	if v := req.QueryStringParameters["wait"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > int(job.MaxLogWait/time.Second) { // n seconds as a Duration could overflow
			return httpapi.Response{}, apierror.New(apierror.InvalidRequest, "wait must be a number of seconds from 0 to %d.", int(job.MaxLogWait/time.Second))
		}
		wait = time.Duration(n) * time.Second
	}
	page, err := h.Jobs.Logs(ctx, hd, req.PathParameters["id"], after, wait)
	if err != nil {
		return httpapi.Response{}, err
	}
	headers := map[string]string{"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", HeaderJobStatus: string(page.Status)}
	if page.Whole != nil {
		defer func() { _ = page.Whole.Close() }()
		b, err := io.ReadAll(io.LimitReader(page.Whole, MaxLogBytes+1))
		if err != nil {
			return httpapi.Response{}, fmt.Errorf("read log: %w", err)
		}
		if len(b) > MaxLogBytes {
			return httpapi.Response{}, apierror.New(apierror.PayloadTooLarge, "The log is larger than %d bytes; read it from its log output's reference.", MaxLogBytes)
		}
		headers["Content-Type"] = "text/plain; charset=utf-8"
		return httpapi.Response{StatusCode: http.StatusOK, Headers: headers, Body: string(b)}, nil
	}
	var sb strings.Builder
	for _, e := range page.Events {
		line, err := json.Marshal(logLine{Seq: e.Seq, Type: e.Type, At: e.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Data: e.Data})
		if err != nil {
			return httpapi.Response{}, fmt.Errorf("encode log line: %w", err)
		}
		sb.Write(line)
		sb.WriteByte('\n')
	}
	headers["Content-Type"] = "application/x-ndjson"
	headers[HeaderLogCursor] = strconv.FormatInt(page.Next, 10)
	return httpapi.Response{StatusCode: http.StatusOK, Headers: headers, Body: sb.String()}, nil
}

// MaxProfileBytes bounds a profile's body (16 Agentfiles of 32 KiB fit).
const MaxProfileBytes = 600 * 1024

func (h *Handlers) putProfile(ctx context.Context, req httpapi.Request, _ job.Headers) (httpapi.Response, error) {
	var in job.ProfileInput
	if err := httpapi.DecodeJSON(req, MaxProfileBytes, &in); err != nil {
		return httpapi.Response{}, err
	}
	p, err := h.Jobs.PutProfile(ctx, req.PathParameters["id"], in)
	if err != nil {
		return httpapi.Response{}, err
	}
	return httpapi.JSON(http.StatusOK, p), nil
}

func (h *Handlers) getProfile(ctx context.Context, req httpapi.Request, _ job.Headers) (httpapi.Response, error) {
	p, err := h.Jobs.Profile(ctx, req.PathParameters["id"])
	if err != nil {
		return httpapi.Response{}, err
	}
	return httpapi.JSON(http.StatusOK, p), nil
}

// profilesBody is GET /internal/agents's answer.
type profilesBody struct {
	Agents []job.Profile `json:"agents"`
	Next   string        `json:"next_cursor,omitempty"`
}

func (h *Handlers) listProfiles(ctx context.Context, req httpapi.Request, _ job.Headers) (httpapi.Response, error) {
	cursor := req.QueryStringParameters["cursor"]
	if len(cursor) > 2048 {
		return httpapi.Response{}, apierror.New(apierror.InvalidRequest, "Invalid cursor.")
	}
	ps, next, err := h.Jobs.Profiles(ctx, cursor)
	if err != nil {
		return httpapi.Response{}, err
	}
	if ps == nil {
		ps = []job.Profile{}
	}
	return httpapi.JSON(http.StatusOK, profilesBody{Agents: ps, Next: next}), nil
}
