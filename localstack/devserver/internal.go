package devserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/sigv4"
)

// The dev orchestrator's credentials, which sign calls to the /internal/
// routes (service execute-api, the dev region), unless
// RA_DEV_ORCHESTRATOR_KEY_ID / RA_DEV_ORCHESTRATOR_SECRET say otherwise.
const (
	DefaultOrchestratorKeyID  = "AKIDRADEVORCHESTRATOR"
	DefaultOrchestratorSecret = "ra-dev-orchestrator-secret" //nolint:gosec // the dev stack's published default, like the dev app key
)

// OrchestratorCredentialsFromEnv returns the dev orchestrator's key id and
// secret from lookup (RA_DEV_ORCHESTRATOR_KEY_ID, RA_DEV_ORCHESTRATOR_SECRET),
// the defaults where unset.
func OrchestratorCredentialsFromEnv(lookup func(string) (string, bool)) (keyID, secret string) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	keyID, secret = DefaultOrchestratorKeyID, DefaultOrchestratorSecret
	if v, ok := lookup("RA_DEV_ORCHESTRATOR_KEY_ID"); ok && v != "" {
		keyID = v
	}
	if v, ok := lookup("RA_DEV_ORCHESTRATOR_SECRET"); ok && v != "" {
		secret = v
	}
	return keyID, secret
}

// iamAuth is API Gateway's IAM authorization of the /internal/ routes (and
// a function URL's, for their streams): the request's SigV4 signature is
// verified with the orchestrator's credentials, and the handler is told the
// caller was the orchestrator's role.
type iamAuth struct {
	// verifier checks signatures for API Gateway (service execute-api),
	// streams for a Lambda function URL (service lambda), as on AWS.
	verifier, streams *sigv4.Verifier
	// roleARN is the caller a verified request is from.
	roleARN string
}

// authorize verifies r (with its body) and sets the caller on ev; a request
// it refuses gets the 403 API Gateway answers. stream says r is for a
// streaming route.
func (a *iamAuth) authorize(r *http.Request, body []byte, ev *httpapi.Request, stream bool) (httpapi.Response, bool) {
	v := a.verifier
	if stream {
		v = a.streams
	}
	headers := make(map[string]string, len(r.Header)+1)
	for k, v := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	headers["host"] = r.Host
	keyID, err := v.Verify(sigv4.Request{Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Headers: headers, Body: body})
	if err != nil {
		msg := "The request signature is not valid."
		switch {
		case errors.Is(err, sigv4.ErrUnsigned):
			msg = "The request is not signed (AWS SigV4, service " + v.Service + ")."
		case errors.Is(err, sigv4.ErrScope):
			msg = "The request is signed for another region or service: sign for " + v.Region + ", service " + v.Service + "."
		}
		return httpapi.Error(r.Context(), nil, apierror.New(apierror.Forbidden, "%s", msg)), false
	}
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccessKey: keyID, UserARN: a.roleARN, AccountID: "000000000000"},
	}
	return httpapi.Response{}, true
}

// JobSweepInterval is how often the dev server sweeps the jobs.
const JobSweepInterval = 15 * time.Second

// sweepJobs sweeps the jobs every JobSweepInterval until ctx ends.
func sweepJobs(ctx context.Context, svc *job.Service, log *slog.Logger) {
	t := time.NewTicker(JobSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := svc.Sweep(ctx); err != nil && ctx.Err() == nil {
				log.Warn("devserver: sweep jobs", slog.String("error", err.Error()))
			}
		}
	}
}
