// Package retry runs the platform's calls again after failures worth
// retrying, on cenkalti/backoff: up to a number of attempts in all, waiting
// between them a full-jitter exponential backoff (each wait uniform between
// zero and a ceiling doubling from a base up to a maximum), and no longer
// than the caller's context. The sandbox's retries, which honour Retry-After,
// are package sandbox/retry's.
package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Policy says how often to try and how long to wait in between.
type Policy struct {
	// Attempts is how many times the operation is tried in all; at least 1.
	Attempts int
	// Base is the ceiling of the first wait; each next ceiling is twice the
	// last, up to Max.
	Base, Max time.Duration
	// Notify, when set, is told each wait before it is waited (tests record
	// them).
	Notify func(wait time.Duration)
}

// Do runs op until it returns nil or a Permanent error, the attempts are
// spent or ctx ends. It returns nil; op's last error (a Permanent one
// unwrapped); or, when ctx ended before the next attempt, an
// *InterruptedError.
func Do(ctx context.Context, p Policy, op func() error) error {
	var last error
	opts := []backoff.RetryOption{
		backoff.WithBackOff(&FullJitter{Base: p.Base, Max: p.Max}),
		backoff.WithMaxTries(uint(max(p.Attempts, 1))),
		backoff.WithMaxElapsedTime(0), // ctx bounds the time
	}
	if p.Notify != nil {
		opts = append(opts, backoff.WithNotify(func(_ error, wait time.Duration) { p.Notify(wait) }))
	}
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		last = op()
		return struct{}{}, last
	}, opts...)
	if err == nil {
		return nil
	}
	if perm := (*backoff.PermanentError)(nil); errors.As(last, &perm) {
		return perm.Err
	}
	if cause := context.Cause(ctx); cause != nil && errors.Is(err, cause) && !errors.Is(last, cause) {
		return &InterruptedError{Cause: cause, Last: last}
	}
	return err
}

// InterruptedError is Do's error when its context ended before the next
// attempt: the context's cause, and the error of the attempt before.
type InterruptedError struct {
	Cause, Last error
}

func (e *InterruptedError) Error() string { return e.Cause.Error() + " (" + e.Last.Error() + ")" }

// Unwrap returns the cause and the last error.
func (e *InterruptedError) Unwrap() []error { return []error{e.Cause, e.Last} }

// Permanent marks err as not worth retrying: Do returns err itself at once.
func Permanent(err error) error { return backoff.Permanent(err) }

// FullJitter is a backoff.BackOff whose nth wait (from 0) is uniform in
// [0, min(Base·2ⁿ, Max)]; a Max of 0 or less waits not at all.
type FullJitter struct {
	Base, Max time.Duration
	n         int
}

var _ backoff.BackOff = (*FullJitter)(nil)

// NextBackOff returns the next wait.
func (b *FullJitter) NextBackOff() time.Duration {
	ceiling := b.Base << min(b.n, 20)
	b.n++
	if ceiling > b.Max || ceiling <= 0 {
		ceiling = b.Max
	}
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1)) //nolint:gosec // jitter, not a secret
}

// Reset starts the waits over.
func (b *FullJitter) Reset() { b.n = 0 }
