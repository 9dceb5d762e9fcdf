package retry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/retry"
)

// fast retries at once, nearly.
var fast = retry.Policy{Retries: 5, Initial: time.Millisecond, Max: 2 * time.Millisecond}

// server answers request i (from 0) with statuses[i], the last one repeating,
// and counts the requests.
func server(t *testing.T, header http.Header, statuses ...int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		i := int(n.Add(1)) - 1
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(statuses[min(i, len(statuses)-1)])
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// get is an attempt as the agent's clients make them: a transport failure as
// is, an answer other than 200 marked by retry.Status.
func get(ctx context.Context, url string) func() (int, error) {
	return func() (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, retry.Permanent(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return res.StatusCode, retry.Status(fmt.Errorf("answered %d", res.StatusCode), res.StatusCode, res.Header)
		}
		return res.StatusCode, nil
	}
}

func TestRetriesUntilSuccess(t *testing.T) {
	srv, n := server(t, nil, 503, 503, 200)
	status, err := retry.Do(t.Context(), fast, get(t.Context(), srv.URL))
	if err != nil || status != 200 || n.Load() != 3 {
		t.Errorf("status %d, %v after %d requests; want 200 after 3", status, err, n.Load())
	}
}

func TestStatuses(t *testing.T) {
	tests := []struct {
		status   int
		requests int32
	}{
		{http.StatusTooManyRequests, 6},
		{http.StatusInternalServerError, 6},
		{http.StatusBadGateway, 6},
		{http.StatusServiceUnavailable, 6},
		{http.StatusBadRequest, 1},
		{http.StatusUnauthorized, 1},
		{http.StatusForbidden, 1},
		{http.StatusNotFound, 1},
		{http.StatusConflict, 1},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			srv, n := server(t, nil, tt.status)
			status, err := retry.Do(t.Context(), fast, get(t.Context(), srv.URL))
			if err == nil || status != tt.status || n.Load() != tt.requests {
				t.Errorf("status %d, %v after %d requests, want %d", status, err, n.Load(), tt.requests)
			}
			if err != nil && err.Error() != fmt.Sprintf("answered %d", tt.status) {
				t.Errorf("error %q is not the attempt's", err)
			}
		})
	}
}

func TestRetriesTransportFailures(t *testing.T) {
	srv, _ := server(t, nil, 200)
	url := srv.URL
	srv.Close() // refused from now on
	var n atomic.Int32
	attempt := get(t.Context(), url)
	_, err := retry.Do(t.Context(), retry.Policy{Retries: 2, Initial: time.Millisecond}, func() (int, error) {
		n.Add(1)
		return attempt()
	})
	if err == nil || n.Load() != 3 {
		t.Errorf("%v after %d attempts, want a failure after 3", err, n.Load())
	}
}

// The backoff would wait an hour; Retry-After: 0 says now.
func TestRespectsRetryAfter(t *testing.T) {
	srv, n := server(t, http.Header{"Retry-After": {"0"}}, 429, 200)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	status, err := retry.Do(ctx, retry.Policy{Retries: 1, Initial: time.Hour, Max: time.Hour}, get(ctx, srv.URL))
	if err != nil || status != 200 || n.Load() != 2 {
		t.Errorf("status %d, %v after %d requests", status, err, n.Load())
	}
}

func TestCancelledContextStopsRetrying(t *testing.T) {
	srv, n := server(t, nil, 503)
	ctx, cancel := context.WithCancel(t.Context())
	attempt := get(ctx, srv.URL)
	_, err := retry.Do(ctx, retry.Policy{Retries: 100, Initial: time.Hour}, func() (int, error) {
		status, err := attempt()
		cancel() // while the backoff waits an hour
		return status, err
	})
	if !errors.Is(err, context.Canceled) || n.Load() != 1 {
		t.Errorf("%v after %d requests, want context.Canceled after 1", err, n.Load())
	}
}

// A context that ends while the backoff waits ends the wait.
func TestContextEndsTheWait(t *testing.T) {
	srv, n := server(t, nil, 503)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := retry.Do(ctx, retry.Policy{Retries: 100, Initial: time.Hour, Max: time.Hour}, get(ctx, srv.URL))
	if !errors.Is(err, context.DeadlineExceeded) || n.Load() != 1 || time.Since(start) > 10*time.Second {
		t.Errorf("%v after %d requests and %s", err, n.Load(), time.Since(start))
	}
}

func TestNoRetries(t *testing.T) {
	srv, n := server(t, nil, 503)
	if _, err := retry.Do(t.Context(), retry.Policy{}, get(t.Context(), srv.URL)); err == nil || n.Load() != 1 {
		t.Errorf("%v after %d requests, want one", err, n.Load())
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"3", 3 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"86400", retry.MaxRetryAfter, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 0, true}, // in the past
		{time.Now().Add(time.Hour).UTC().Format(http.TimeFormat), retry.MaxRetryAfter, true},
	}
	for _, tt := range tests {
		got, ok := retry.RetryAfter(http.Header{"Retry-After": {tt.in}})
		if got != tt.want || ok != tt.ok {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "-5", "Wed, 21 Oct 2015 07:28:00 GMT", "9223372036854775807", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := retry.RetryAfter(http.Header{"Retry-After": {v}})
		if d < 0 || d > retry.MaxRetryAfter || (!ok && d != 0) {
			t.Errorf("RetryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}
