package httpapi_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
)

func TestEnvelopeOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want httpapi.Envelope
	}{
		{"not found", apierror.New(apierror.ProjectNotFound, "no project %q", "x"),
			httpapi.Envelope{Status: 404, ErrorCode: "project_not_found", Message: `no project "x"`}},
		{"timeout is retryable", apierror.New(apierror.AgentCreationTimeout, "slow"),
			httpapi.Envelope{Status: 408, ErrorCode: "agent_creation_timeout", Message: "slow", Retryable: true}},
		{"wrapped", fmt.Errorf("create: %w", apierror.New(apierror.MissingToken, "no token")),
			httpapi.Envelope{Status: 401, ErrorCode: "missing_token", Message: "no token"}},
		{"guardrails", apierror.New(apierror.GuardrailsMissing, "g"),
			httpapi.Envelope{Status: 503, ErrorCode: "guardrails_missing", Message: "g"}},
		{"retry after", &apierror.Error{Code: apierror.ServiceUnavailable, Message: "busy", RetryAfter: 3},
			httpapi.Envelope{Status: 503, ErrorCode: "service_unavailable", Message: "busy", Retryable: true, RetryAfterSeconds: 3}},
		{"details", &apierror.Error{Code: apierror.InvalidRequest, Message: "bad tools", Details: map[string]any{"invalid_tools": []string{"ssh"}}},
			httpapi.Envelope{Status: 400, ErrorCode: "invalid_request", Message: "bad tools", Details: map[string]any{"invalid_tools": []string{"ssh"}}}},
		{"a reused idempotency key is final", apierror.New(apierror.IdempotencyKeyReused, "used"),
			httpapi.Envelope{Status: 409, ErrorCode: "idempotency_key_reused", Message: "used"}},
		{"a quota is retryable later", &apierror.Error{Code: apierror.QuotaExceeded, Message: "busy", RetryAfter: 15, Details: map[string]any{"quota": "creates_per_minute"}},
			httpapi.Envelope{Status: 429, ErrorCode: "quota_exceeded", Message: "busy", Retryable: true, RetryAfterSeconds: 15, Details: map[string]any{"quota": "creates_per_minute"}}},
		{"unknown agent type", apierror.New(apierror.AgentTypeNotFound, "none"),
			httpapi.Envelope{Status: 404, ErrorCode: "agent_type_not_found", Message: "none"}},
	}
	for _, tt := range tests {
		if got := httpapi.EnvelopeOf(tt.err); !reflect.DeepEqual(got, tt.want) {
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
		env := httpapi.EnvelopeOf(err)
		if env.ErrorCode != apierror.ServerError || env.Status != 500 || env.Message == err.Error() {
			t.Errorf("%v leaked as %+v", err, env)
		}
		if !httpapi.Internal(err) {
			t.Errorf("Internal(%v) = false", err)
		}
	}
}
