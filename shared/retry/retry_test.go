package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/retry"
)

var errFlaky = errors.New("flaky")

func TestDoTriesItsAttemptsAndWaitsWithinTheCeilings(t *testing.T) {
	t.Parallel()
	var waits []time.Duration
	n := 0
	err := retry.Do(t.Context(), retry.Policy{Attempts: 4, Base: time.Millisecond, Max: 3 * time.Millisecond,
		Notify: func(d time.Duration) { waits = append(waits, d) }}, func() error {
		n++
		return errFlaky
	})
	if !errors.Is(err, errFlaky) || n != 4 || len(waits) != 3 {
		t.Fatalf("%v after %d tries and waits %v; want flaky after 4 tries, 3 waits", err, n, waits)
	}
	for i, ceiling := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond} {
		if waits[i] < 0 || waits[i] > ceiling {
			t.Errorf("wait %d: %v, want within [0, %v]", i, waits[i], ceiling)
		}
	}
}

func TestDoStopsAtSuccessOrAPermanentError(t *testing.T) {
	t.Parallel()
	p := retry.Policy{Attempts: 5, Base: time.Millisecond, Max: time.Millisecond}
	n := 0
	if err := retry.Do(t.Context(), p, func() error {
		if n++; n < 3 {
			return errFlaky
		}
		return nil
	}); err != nil || n != 3 {
		t.Errorf("%v after %d tries, want success after 3", err, n)
	}
	for _, last := range []int{1, 5} { // a permanent error before the last try, and on it
		n = 0
		final := errors.New("final")
		err := retry.Do(t.Context(), p, func() error {
			if n++; n < last {
				return errFlaky
			}
			return retry.Permanent(final)
		})
		if !errors.Is(err, final) || errors.Unwrap(err) != nil || n != last {
			t.Errorf("%v (%T) after %d tries, want final itself after %d", err, err, n, last)
		}
	}
}

// A context that ends while Do waits ends the wait; the error says both why
// and what failed last.
func TestDoEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	n := 0
	err := retry.Do(ctx, retry.Policy{Attempts: 3, Base: time.Hour, Max: time.Hour,
		Notify: func(time.Duration) { cancel() }}, func() error {
		n++
		return errFlaky
	})
	var ie *retry.InterruptedError
	if !errors.As(err, &ie) || !errors.Is(err, context.Canceled) || !errors.Is(err, errFlaky) || err.Error() != "context canceled (flaky)" || n != 1 {
		t.Errorf("%v after %d tries, want canceled (flaky) after 1", err, n)
	}
}

func TestFullJitterResets(t *testing.T) {
	t.Parallel()
	b := &retry.FullJitter{Base: time.Millisecond, Max: time.Hour}
	for range 30 {
		b.NextBackOff()
	}
	b.Reset()
	if d := b.NextBackOff(); d > time.Millisecond {
		t.Errorf("first wait after a reset %v, want at most the base", d)
	}
	if d := (&retry.FullJitter{Base: time.Second}).NextBackOff(); d != 0 {
		t.Errorf("no maximum: waits %v, want 0", d)
	}
}
