package apierror_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/remote-agents/remote-agents/shared/apierror"
)

func TestEnvelopeOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want apierror.Envelope
	}{
		{"not found", apierror.New(apierror.ProjectNotFound, "no project %q", "x"),
			apierror.Envelope{Status: 404, ErrorCode: "project_not_found", Message: `no project "x"`}},
		{"timeout is retryable", apierror.New(apierror.AgentCreationTimeout, "slow"),
			apierror.Envelope{Status: 408, ErrorCode: "agent_creation_timeout", Message: "slow", Retryable: true}},
		{"wrapped", fmt.Errorf("create: %w", apierror.New(apierror.MissingToken, "no token")),
			apierror.Envelope{Status: 401, ErrorCode: "missing_token", Message: "no token"}},
		{"guardrails", apierror.New(apierror.GuardrailsMissing, "g"),
			apierror.Envelope{Status: 503, ErrorCode: "guardrails_missing", Message: "g"}},
		{"retry after", &apierror.Error{Code: apierror.ServiceUnavailable, Message: "busy", RetryAfter: 3},
			apierror.Envelope{Status: 503, ErrorCode: "service_unavailable", Message: "busy", Retryable: true, RetryAfterSeconds: 3}},
	}
	for _, tt := range tests {
		if got := apierror.EnvelopeOf(tt.err); got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestInternalErrorsDoNotLeak(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		errors.New("open /var/task/data/platform-guardrails.md: permission denied"),
		&apierror.Error{Code: "made_up", Message: "secret detail"},
	} {
		env := apierror.EnvelopeOf(err)
		if env.ErrorCode != apierror.ServerError || env.Status != 500 || env.Message == err.Error() {
			t.Errorf("%v leaked as %+v", err, env)
		}
		if !apierror.Internal(err) {
			t.Errorf("Internal(%v) = false", err)
		}
	}
}
