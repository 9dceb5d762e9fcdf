// Package retry tries the agent's calls to the platform again when they fail in
// a way worth retrying: exponential backoff with jitter (cenkalti/backoff),
// bounded by a number of retries and by the caller's context. Transport
// failures, 429 and 5xx are retried, after what Retry-After asks when the
// server sends it; any other answer is final.
package retry

import (
	"cmp"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Policy says how often to retry and how long to wait in between.
type Policy struct {
	// Retries is how many times a failed attempt is tried again; 0: never.
	Retries int
	// Initial is the first wait (default 500 ms); each next one is twice as
	// long, up to Max (default 15 s). Every wait is randomised by ±50%, so
	// that sandboxes failing together do not retry together.
	Initial, Max time.Duration
}

// Defaults of a Policy's waits.
const (
	DefaultInitial = 500 * time.Millisecond
	DefaultMax     = 15 * time.Second
	// MaxRetryAfter bounds the wait a Retry-After header may ask for.
	MaxRetryAfter = time.Minute
)

// Do runs op until it succeeds, fails permanently (Permanent, Status), the
// retries are spent or ctx ends. It returns op's last result with its error,
// or ctx's error once ctx has ended.
func Do[T any](ctx context.Context, p Policy, op func() (T, error)) (T, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = cmp.Or(p.Initial, DefaultInitial)
	b.MaxInterval = cmp.Or(p.Max, DefaultMax)
	b.Multiplier = 2
	return backoff.Retry(ctx, op,
		backoff.WithBackOff(b),
		backoff.WithMaxTries(uint(max(p.Retries, 0))+1),
		backoff.WithMaxElapsedTime(0), // ctx bounds the time
	)
}

// Permanent marks err as not worth retrying; Do returns err itself.
func Permanent(err error) error { return backoff.Permanent(err) }

// Status marks err, the failure of an attempt the server answered with status
// and header: 429 and 5xx are retried, after the Retry-After the header sends
// if any; any other status is permanent.
func Status(err error, status int, header http.Header) error {
	if status != http.StatusTooManyRequests && status < http.StatusInternalServerError {
		return Permanent(err)
	}
	if d, ok := RetryAfter(header); ok {
		return &waitError{err: err, wait: &backoff.RetryAfterError{Duration: d}}
	}
	return err
}

// RetryAfter returns the wait a Retry-After header asks for, in seconds or as
// a date, at most MaxRetryAfter; false when there is none or it is malformed.
func RetryAfter(h http.Header) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int(MaxRetryAfter/time.Second))) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(at), 0), MaxRetryAfter), true
	}
	return 0, false
}

// waitError is a failure to retry after the server's wait, not the backoff's.
type waitError struct {
	err  error
	wait *backoff.RetryAfterError
}

func (e *waitError) Error() string   { return e.err.Error() }
func (e *waitError) Unwrap() []error { return []error{e.err, e.wait} }
