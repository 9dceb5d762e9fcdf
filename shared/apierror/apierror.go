// Package apierror is the one error type of the HTTP API and the one table from its
// codes to HTTP statuses. Every route answers errors with the same envelope:
//
//	{"status":404,"error_code":"project_not_found","message":"…","retryable":false}
//
// Anything that is not an *Error is internal: clients see a generic server_error,
// never the underlying message.
package apierror

import (
	"errors"
	"fmt"
	"net/http"
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
)

// statuses is the one table from code to HTTP status.
var statuses = map[Code]int{
	InvalidRequest:       http.StatusBadRequest,
	ProjectNotFound:      http.StatusNotFound,
	PersonaNotFound:      http.StatusNotFound,
	AgentNotFound:        http.StatusNotFound,
	AgentCreationTimeout: http.StatusRequestTimeout,
	InvalidToken:         http.StatusUnauthorized,
	MissingToken:         http.StatusUnauthorized,
	Forbidden:            http.StatusForbidden,
	IdempotencyKeyReused: http.StatusConflict,
	PayloadTooLarge:      http.StatusRequestEntityTooLarge,
	MethodNotAllowed:     http.StatusMethodNotAllowed,
	NotFound:             http.StatusNotFound,
	ServerError:          http.StatusInternalServerError,
	ServiceUnavailable:   http.StatusServiceUnavailable,
	GuardrailsMissing:    http.StatusServiceUnavailable,
	AgentNotAlive:        http.StatusConflict,
}

// retryable lists the codes a client may retry unchanged.
var retryable = map[Code]bool{
	AgentCreationTimeout: true,
	ServerError:          true,
	ServiceUnavailable:   true,
}

// Error is an error a client may see.
type Error struct {
	Code    Code
	Message string
	// RetryAfter, in seconds, is sent as retry_after_seconds when positive.
	RetryAfter int
}

// New returns an error with code and a message for the client.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Status returns the HTTP status of code; unknown codes are 500.
func Status(code Code) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Envelope is the JSON body of every error response.
type Envelope struct {
	Status            int    `json:"status"`
	ErrorCode         Code   `json:"error_code"`
	Message           string `json:"message"`
	Retryable         bool   `json:"retryable"`
	RetryAfterSeconds int    `json:"retry_after_seconds,omitempty"`
}

// EnvelopeOf returns the envelope a client sees for err. Errors that are not an
// *Error become a generic server_error: their text never reaches the client.
func EnvelopeOf(err error) Envelope {
	var e *Error
	if !errors.As(err, &e) || statuses[e.Code] == 0 {
		e = &Error{Code: ServerError, Message: "The server could not complete the request."}
	}
	return Envelope{
		Status:            Status(e.Code),
		ErrorCode:         e.Code,
		Message:           e.Message,
		Retryable:         retryable[e.Code],
		RetryAfterSeconds: e.RetryAfter,
	}
}

// Internal reports whether err would be shown to the client as a server_error, i.e.
// whether it should be logged as a fault of ours.
func Internal(err error) bool {
	return EnvelopeOf(err).ErrorCode == ServerError
}
