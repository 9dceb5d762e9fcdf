// Package awserr tells an outage from a fault at the AWS adapters' boundary.
// An error that says a service could not be reached or could not serve the
// request now (connection refused or reset, timeouts, throttling, a 5xx from
// the service, the SDK's retry quota spent) is what a client should retry:
// Classify turns it into apierror's service_unavailable, which every route
// answers as 503 with retryable true, keeping the SDK's error in the chain for
// the logs. Anything else is returned as it is.
//
// The checks are the SDK's own rules for what it retries (package retry), so
// an error the SDK gave up retrying is exactly an error the client may retry.
package awserr

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/remote-agents/remote-agents/shared/apierror"
)

// transient are the SDK's checks for errors worth retrying: connection
// failures, 5xx statuses, throttling and timeout codes.
var transient = []retry.IsErrorRetryable{
	retry.RetryableConnectionError{},
	retry.RetryableHTTPStatusCode{Codes: statuses},
	retry.RetryableErrorCode{Codes: retry.DefaultThrottleErrorCodes},
	retry.RetryableErrorCode{Codes: retry.DefaultRetryableErrorCodes},
	retry.RetryableErrorCode{Codes: serverCodes},
}

// statuses are the SDK's retryable statuses plus 429, which the SDK retries
// only when the error is not modelled.
var statuses = func() map[int]struct{} {
	m := map[int]struct{}{429: {}}
	for code := range retry.DefaultRetryableHTTPStatusCodes {
		m[code] = struct{}{}
	}
	return m
}()

// serverCodes are the services' codes for their own failures (DynamoDB's
// InternalServerError, S3's InternalError, SQS's InternalFailure…), whatever
// status they come with.
var serverCodes = map[string]struct{}{
	"InternalServerError":         {},
	"InternalError":               {},
	"InternalFailure":             {},
	"ServiceUnavailable":          {},
	"ServiceUnavailableException": {},
}

// Unavailable reports whether err says the service could not serve the request
// now, rather than that the request was wrong, or was classified so already. A
// context canceled by the caller is not an outage; a deadline passing is.
func Unavailable(err error) bool {
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, context.DeadlineExceeded), apierror.CodeOf(err) == apierror.ServiceUnavailable:
		return true
	}
	var quota ratelimit.QuotaExceededError
	if errors.As(err, &quota) {
		return true
	}
	for _, check := range transient {
		if check.IsErrorRetryable(err) == aws.TrueTernary {
			return true
		}
	}
	return false
}

// Classify returns err as apierror.Unavailable(err) when it is an outage (see
// Unavailable) not classified yet, else err unchanged.
func Classify(err error) error {
	if Unavailable(err) && apierror.CodeOf(err) == "" {
		return apierror.Unavailable(err)
	}
	return err
}
