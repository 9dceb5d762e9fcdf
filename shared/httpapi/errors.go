package httpapi

import (
	"errors"
	"net/http"

	"github.com/remote-agents/remote-agents/shared/apierror"
)

// statuses is the one table from error code to HTTP status.
var statuses = map[apierror.Code]int{
	apierror.InvalidRequest:       http.StatusBadRequest,
	apierror.ProjectNotFound:      http.StatusNotFound,
	apierror.PersonaNotFound:      http.StatusNotFound,
	apierror.AgentNotFound:        http.StatusNotFound,
	apierror.AgentCreationTimeout: http.StatusRequestTimeout,
	apierror.InvalidToken:         http.StatusUnauthorized,
	apierror.MissingToken:         http.StatusUnauthorized,
	apierror.Forbidden:            http.StatusForbidden,
	apierror.IdempotencyKeyReused: http.StatusConflict,
	apierror.PayloadTooLarge:      http.StatusRequestEntityTooLarge,
	apierror.MethodNotAllowed:     http.StatusMethodNotAllowed,
	apierror.NotFound:             http.StatusNotFound,
	apierror.ServerError:          http.StatusInternalServerError,
	apierror.ServiceUnavailable:   http.StatusServiceUnavailable,
	apierror.GuardrailsMissing:    http.StatusServiceUnavailable,
	apierror.AgentNotAlive:        http.StatusConflict,
	apierror.EgressNotIsolated:    http.StatusConflict,
	apierror.SecretNotFound:       http.StatusNotFound,
	apierror.WebhookNotFound:      http.StatusNotFound,
	apierror.SecretExists:         http.StatusConflict,
	apierror.ModelUnavailable:     http.StatusServiceUnavailable,
	apierror.AgentTypeNotFound:    http.StatusNotFound,
	apierror.AgentTypeExists:      http.StatusConflict,
	apierror.WorkspaceDisabled:    http.StatusNotFound,
	apierror.ToolNotFound:         http.StatusNotFound,
	apierror.ToolNotEnabled:       http.StatusForbidden,
	apierror.MissingHeaders:       http.StatusBadRequest,
	apierror.JobNotFound:          http.StatusNotFound,
	apierror.JobNotRunning:        http.StatusConflict,
	apierror.PlanStepConflict:     http.StatusConflict,
	apierror.AgentProfileNotFound: http.StatusNotFound,
	apierror.QuotaExceeded:        http.StatusTooManyRequests,
	apierror.BudgetExceeded:       http.StatusTooManyRequests,
	apierror.UnsupportedMediaType: http.StatusUnsupportedMediaType,
	apierror.CheckpointInvalid:    http.StatusUnprocessableEntity,
	apierror.CheckpointNotFound:   http.StatusNotFound,
	apierror.AlreadyPaused:        http.StatusConflict,
}

// retryable lists the codes a client may retry unchanged.
var retryable = map[apierror.Code]bool{
	apierror.AgentCreationTimeout: true,
	apierror.ServerError:          true,
	apierror.ServiceUnavailable:   true,
	apierror.QuotaExceeded:        true,
	apierror.BudgetExceeded:       true,
}

// Status returns the HTTP status of code; unknown codes are 500.
func Status(code apierror.Code) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Envelope is the JSON body of every error response:
//
//	{"status":404,"error_code":"project_not_found","message":"…","retryable":false}
type Envelope struct {
	Status            int           `json:"status"`
	ErrorCode         apierror.Code `json:"error_code"`
	Message           string        `json:"message"`
	Retryable         bool          `json:"retryable"`
	RetryAfterSeconds int           `json:"retry_after_seconds,omitempty"`
	// Details are an error's machine-readable specifics, where it has any.
	Details map[string]any `json:"details,omitempty"`
}

// EnvelopeOf returns the envelope a client sees for err. Errors that are not an
// *apierror.Error with a known code become a generic server_error: their text
// never reaches the client.
func EnvelopeOf(err error) Envelope {
	var e *apierror.Error
	if !errors.As(err, &e) || statuses[e.Code] == 0 {
		e = &apierror.Error{Code: apierror.ServerError, Message: "The server could not complete the request."}
	}
	return Envelope{
		Status:            Status(e.Code),
		ErrorCode:         e.Code,
		Message:           e.Message,
		Retryable:         retryable[e.Code],
		RetryAfterSeconds: e.RetryAfter,
		Details:           e.Details,
	}
}

// Internal reports whether err would be shown to the client as a server_error,
// i.e. whether it should be logged as a fault of ours.
func Internal(err error) bool {
	return EnvelopeOf(err).ErrorCode == apierror.ServerError
}
