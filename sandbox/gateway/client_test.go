package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/retry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// flaky is a gateway answering request i (from 0) with statuses[i], the last
// one repeating; 200 answers with orders to stop.
func flaky(t *testing.T, statuses ...int) (*Client, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		if r.URL.Path != "/sandbox/s1/heartbeat" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "wrong request", http.StatusBadRequest)
			return
		}
		status := statuses[min(i, len(statuses)-1)]
		w.WriteHeader(status)
		if status == http.StatusOK {
			_ = json.NewEncoder(w).Encode(sandboxwire.Orders{Stop: true})
		}
	}))
	t.Cleanup(srv.Close)
	cl := New(srv.URL, "s1", "tok", nil)
	cl.http, cl.retry = srv.Client(), retry.Policy{Retries: 4, Initial: time.Millisecond, Max: 2 * time.Millisecond}
	return cl, &n
}

func TestClientRetries(t *testing.T) {
	tests := []struct {
		name     string
		statuses []int
		requests int32
		err      func(error) bool
	}{
		{"503 twice, then 200", []int{503, 503, 200}, 3, func(err error) bool { return err == nil }},
		{"429, then 200", []int{429, 200}, 2, func(err error) bool { return err == nil }},
		{"503 always", []int{503}, 5, func(err error) bool { return err != nil && strings.Contains(err.Error(), "gateway answered 503") }},
		{"401 is not retried", []int{401, 200}, 1, func(err error) bool { _, ok := errors.AsType[*AuthError](err); return ok }},
		{"403 is not retried", []int{403, 200}, 1, func(err error) bool { _, ok := errors.AsType[*AuthError](err); return ok }},
		{"404 is not retried", []int{404, 200}, 1, func(err error) bool { return err != nil && strings.Contains(err.Error(), "gateway answered 404") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl, n := flaky(t, tt.statuses...)
			var orders sandboxwire.Orders
			err := cl.Do(t.Context(), http.MethodPost, sandboxwire.RouteHeartbeat, struct{}{}, &orders)
			if !tt.err(err) || n.Load() != tt.requests {
				t.Errorf("%v after %d requests, want %d", err, n.Load(), tt.requests)
			}
			if err == nil && !orders.Stop {
				t.Error("orders not decoded")
			}
		})
	}
}

func TestClientStopsRetryingWhenCancelled(t *testing.T) {
	cl, n := flaky(t, 503)
	cl.retry = retry.Policy{Retries: 100, Initial: time.Hour}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	var orders sandboxwire.Orders
	err := cl.Do(ctx, http.MethodPost, sandboxwire.RouteHeartbeat, struct{}{}, &orders)
	if !errors.Is(err, context.DeadlineExceeded) || n.Load() != 1 {
		t.Errorf("%v after %d requests", err, n.Load())
	}
}
