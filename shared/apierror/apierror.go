// Package apierror is the one error type clients may see: a code from the
// specs and a message for people. Codes are domain vocabulary; how they travel
// (HTTP statuses, the error envelope, retryable) is package httpapi's.
//
// Anything that is not an *Error is internal: clients see a generic server_error,
// never the underlying message.
package apierror

import (
	"errors"
	"fmt"
)

// Code is a machine-readable error code.
type Code string

// The codes of the API, from the specs.
const (
	InvalidRequest       Code = "invalid_request"
	ProjectNotFound      Code = "project_not_found"
	PersonaNotFound      Code = "persona_not_found"
	AgentNotFound        Code = "agent_not_found"
	AgentCreationTimeout Code = "agent_creation_timeout"
	InvalidToken         Code = "invalid_token"
	MissingToken         Code = "missing_token"
	Forbidden            Code = "forbidden"
	IdempotencyKeyReused Code = "idempotency_key_reused"
	PayloadTooLarge      Code = "payload_too_large"
	MethodNotAllowed     Code = "method_not_allowed"
	NotFound             Code = "not_found"
	ServerError          Code = "server_error"
	ServiceUnavailable   Code = "service_unavailable"
	GuardrailsMissing    Code = "guardrails_missing"
	AgentNotAlive        Code = "agent_not_alive"
	// EgressNotIsolated: the agent's sandbox was started with open egress
	// and is not cut off from the network: no other policy can hold for it.
	EgressNotIsolated Code = "egress_not_isolated"
	// SecretNotFound: the app has no secret of that name.
	SecretNotFound Code = "secret_not_found"
	// WebhookNotFound: the app has no webhook endpoint of that id (another
	// app's is not found either).
	WebhookNotFound Code = "webhook_not_found"
	// SecretExists: the app has a secret of that name already.
	SecretExists Code = "secret_exists"
	// ModelUnavailable: the agent's sandbox found no usable model, so it was not
	// started; the platform's model settings need fixing.
	ModelUnavailable Code = "model_unavailable"
	// AgentTypeNotFound: no agent type of that id the caller's tenant may
	// use (another tenant's is not found either).
	AgentTypeNotFound Code = "agent_type_not_found"
	// AgentTypeExists: an agent type of that id exists already (the
	// tenant's own, or a platform type).
	AgentTypeExists Code = "agent_type_exists"
	// WorkspaceDisabled: the agent's type has no workspace, so no workspace
	// tools.
	WorkspaceDisabled Code = "workspace_disabled"
	// ToolNotFound: no workspace tool has that name.
	ToolNotFound Code = "tool_not_found"
	// ToolNotEnabled: the agent's type does not enable that workspace tool.
	ToolNotEnabled Code = "tool_not_enabled"
	// MissingHeaders: an /internal request lacks mandatory headers (the
	// orchestrator's x-identity-id, x-context-id, x-command-id,
	// x-plan-step-id); details.missing names them.
	MissingHeaders Code = "missing_headers"
	// JobNotFound: no job of that id for the identity and context asked
	// (another's is not found either).
	JobNotFound Code = "job_not_found"
	// JobNotRunning: the job has finished; it cannot be cancelled.
	JobNotRunning Code = "job_not_running"
	// PlanStepConflict: the plan step has a job created from another request.
	PlanStepConflict Code = "plan_step_conflict"
	// AgentProfileNotFound: no agent profile of that id.
	AgentProfileNotFound Code = "agent_profile_not_found"
	// QuotaExceeded: the app holds or opens as much as its quota allows
	// (live agents, creates a minute, event streams of an agent); retry
	// after retry_after_seconds.
	QuotaExceeded Code = "quota_exceeded"
	// BudgetExceeded: the app's model calls cost its daily budget already;
	// retry after retry_after_seconds (the next UTC day).
	BudgetExceeded Code = "budget_exceeded"
	// UnsupportedMediaType: a JSON route got a body whose Content-Type is
	// not JSON.
	UnsupportedMediaType Code = "unsupported_media_type"
	// CheckpointInvalid: a sandbox's checkpoint is not what it says (its
	// manifest malformed, a chunk missing or not what its hash says), so
	// it was not committed.
	CheckpointInvalid Code = "checkpoint_invalid"
	// CheckpointNotFound: the agent has no checkpoint of that id.
	CheckpointNotFound Code = "checkpoint_not_found"
	// AlreadyPaused: a pause of a sandbox that is paused already (the
	// sandbox API's 409).
	AlreadyPaused Code = "already_paused"
)

// Error is an error a client may see.
type Error struct {
	Code    Code
	Message string
	// RetryAfter, in seconds, is sent as retry_after_seconds when positive.
	RetryAfter int
	// Details, if set, is sent as details: machine-readable specifics of the
	// error (e.g. invalid_tools and valid_tools), never the request echoed
	// beyond what the message names.
	Details map[string]any
}

// New returns an error with code and a message for the client.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// CodeOf returns the code of the *Error in err's chain, or "" if there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// UnavailableRetryAfter is how many seconds a client is told to wait before
// retrying after an outage (see Unavailable).
const UnavailableRetryAfter = 5

// Unavailable returns the error clients see as service_unavailable (retryable,
// after UnavailableRetryAfter seconds) for cause: a service the platform depends
// on could not be reached or could not serve the request now. cause stays in the
// chain for logs and errors.Is/As, and never reaches the client.
func Unavailable(cause error) error {
	return &unavailable{cause: cause}
}

type unavailable struct{ cause error }

func (u *unavailable) Error() string { return string(ServiceUnavailable) + ": " + u.cause.Error() }

func (u *unavailable) Unwrap() []error {
	return []error{&Error{
		Code:       ServiceUnavailable,
		Message:    "A service the platform depends on is unavailable; try again shortly.",
		RetryAfter: UnavailableRetryAfter,
	}, u.cause}
}
