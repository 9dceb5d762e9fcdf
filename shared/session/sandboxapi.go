package session

import (
	"context"
	"errors"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/report"
)

// SandboxRequest is a create of the sandbox API (the E2B-compatible
// control plane): a session with no initial prompt, whose client runs its
// processes through envd.
type SandboxRequest struct {
	SandboxOptions
	// Timeout is how long the sandbox runs before its end (Session.EndsAt).
	Timeout time.Duration
	// Offline keeps it from the internet (its egress policy none).
	Offline bool
}

// CreateSandbox makes the session of a sandbox of the sandbox API and
// waits until it is ready, as Create does, under the same quotas and
// budgets. Its template names an agent type of the app; the default
// template (DefaultSandboxTemplate) is no type unless the app has one of
// that id.
func (s *Creator) CreateSandbox(ctx context.Context, app registry.AppKey, req SandboxRequest) (Created, error) {
	doc, err := guardrails.Load(ctx, s.o.Guardrails)
	if err != nil {
		ReportGuardrails(ctx, s.o.Reporter, report.Critical, err.Error(), map[string]string{"agent_id": "", "template": req.Template})
		return Created{}, apierror.New(apierror.GuardrailsMissing, "Sandboxes cannot be created: the platform guardrails are unavailable.")
	}
	typ, err := s.agentType(ctx, app, req.Template, registry.Persona{})
	if req.Template == DefaultSandboxTemplate && apierror.CodeOf(err) == apierror.AgentTypeNotFound {
		typ, err = nil, nil
	}
	if err != nil {
		return Created{}, err
	}
	opts := req.SandboxOptions
	cr := CreateRequest{sandbox: &opts, endsIn: req.Timeout, offline: req.Offline}
	sess, plain, err := s.startOrResume(ctx, app, cr, doc, typ)
	if err != nil {
		return Created{}, err
	}
	ready, err := s.waitReady(ctx, sess.ID)
	if errors.Is(err, errNotReady) {
		// Nobody can take it up (the sandbox API has no idempotency key):
		// it ends now rather than at its timeout.
		s.fail(context.WithoutCancel(ctx), sess.ID, sess.Generation, ReasonTimeout)
		return Created{}, &apierror.Error{Code: apierror.ServiceUnavailable, RetryAfter: apierror.UnavailableRetryAfter,
			Message: "The sandbox was not ready within " + s.o.CreationTimeout.String() + "; try again."}
	}
	if err != nil {
		return Created{}, err
	}
	return s.created(ready, plain), nil
}

// expire is the session.expire of sess at its end, and its delay from now.
func expire(sess Session, now time.Time) (jobqueue.Message, time.Duration) {
	return jobqueue.ExpireAt(sess.ID, sess.Generation, sess.EndsAt, now)
}
