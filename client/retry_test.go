package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// answering serves the create route: answer i (from 0) is answers[i], the
// last one repeating; it counts the requests.
func answering(t *testing.T, answers ...string) (*Client, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		body := answers[min(int(n.Add(1))-1, len(answers)-1)]
		var status int
		switch body {
		case unavailable:
			status = http.StatusServiceUnavailable
		case creating:
			status = http.StatusRequestTimeout
		case notFound:
			status = http.StatusNotFound
		default:
			status = http.StatusOK
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "k", WithMaxRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	return c, &n
}

const (
	unavailable = `{"status":503,"error_code":"service_unavailable","message":"try again","retryable":true}`
	creating    = `{"status":408,"error_code":"agent_creation_timeout","message":"still starting","retryable":true}`
	notFound    = `{"status":404,"error_code":"project_not_found","message":"no such project","retryable":false}`
	ready       = `{"agent_id":"a1","status":"ready"}`
)

// Retryable answers are retried maxRetries times, after waits doubling from
// 200 ms; an agent still starting is asked again without counting, after
// 100 ms; an answer that is not retryable is final.
func TestRetrySemantics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		answers  []string
		requests int32
		waits    []time.Duration
		code     string
	}{
		{"retries spent", []string{unavailable}, 3, []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}, CodeServiceUnavailable},
		{"then ready", []string{unavailable, ready}, 2, []time.Duration{200 * time.Millisecond}, ""},
		{"still starting, not counted", []string{creating, creating, creating, ready}, 4, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}, ""},
		{"final", []string{notFound}, 1, nil, CodeProjectNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, n := answering(t, tt.answers...)
			var waits []time.Duration
			c.notify = func(d time.Duration) { waits = append(waits, d) }
			agent, err := c.Create(t.Context(), CreateRequest{ProjectName: "p"})
			if tt.code == "" && (err != nil || agent.AgentID != "a1") {
				t.Fatalf("create: %v", err)
			}
			if tt.code != "" && !IsCode(err, tt.code) {
				t.Fatalf("create: %v, want %s", err, tt.code)
			}
			if n.Load() != tt.requests || !slices.Equal(waits, tt.waits) {
				t.Errorf("%d requests, waits %v; want %d, %v", n.Load(), waits, tt.requests, tt.waits)
			}
		})
	}
}

// A context that ends while the client waits to retry ends the wait; the
// error is both the answer and the context's.
func TestRetryEndsWithTheContext(t *testing.T) {
	t.Parallel()
	c, n := answering(t, unavailable)
	ctx, cancel := context.WithCancel(t.Context())
	c.notify = func(time.Duration) { cancel() }
	_, err := c.Create(ctx, CreateRequest{ProjectName: "p"})
	if !errors.Is(err, context.Canceled) || !IsCode(err, CodeServiceUnavailable) || n.Load() != 1 {
		t.Errorf("%v after %d requests; want the 503 and canceled after 1", err, n.Load())
	}
}
