package callback

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// gateway answers attempt i with steps[i] (the last one repeats) and records
// every request body.
type gateway struct {
	mu     sync.Mutex
	steps  []step
	bodies []map[string]any
	paths  []string
	auth   []string
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	g.mu.Lock()
	i := len(g.bodies)
	g.bodies = append(g.bodies, body)
	g.paths = append(g.paths, r.URL.Path)
	g.auth = append(g.auth, r.Header.Get("Authorization"))
	next := g.steps[min(i, len(g.steps)-1)]
	g.mu.Unlock()
	next(w, r)
}

// step answers one attempt.
type step func(w http.ResponseWriter, r *http.Request)

// seen returns a copy of what the gateway received, under its lock.
func (g *gateway) seen() (bodies []map[string]any, paths, auth []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]map[string]any(nil), g.bodies...), append([]string(nil), g.paths...), append([]string(nil), g.auth...)
}

func (g *gateway) attempts() int {
	b, _, _ := g.seen()
	return len(b)
}

func hangUp(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func answer(status int, body string, headers ...string) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// client calls g, retrying at once (nearly); its polls record how long they
// would have waited, and do not.
func client(t *testing.T, g *gateway) (*Client, *[]time.Duration) {
	t.Helper()
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	var slept []time.Duration
	var mu sync.Mutex
	return &Client{
		Gateway: srv.URL, SessionID: "s-1", Token: "rsb_x", BaseDelay: time.Millisecond,
		Sleep: func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			slept = append(slept, d)
			mu.Unlock()
			return ctx.Err()
		},
	}, &slept
}

const ok = `{"success":true,"result":"Saved.","data":{"n":1}}`

func TestRetriesTransportFailuresWithTheSameID(t *testing.T) {
	g := &gateway{steps: []step{hangUp, hangUp, answer(200, ok)}}
	c, slept := client(t, g)
	res := c.Call(t.Context(), "save_snapshot", "call-7", map[string]any{"message": "m"})
	if !res.Success || res.Result != "Saved." || res.Data["n"] != float64(1) {
		t.Fatalf("result %+v", res)
	}
	bodies, paths, auth := g.seen()
	if len(bodies) != 3 {
		t.Fatalf("%d attempts, want 3", len(bodies))
	}
	for i, b := range bodies {
		if b["tool_call_id"] != "call-7" || paths[i] != "/proliferate/s-1/tools/save_snapshot" || auth[i] != "Bearer rsb_x" {
			t.Errorf("attempt %d: %v %s %s", i, b, paths[i], auth[i])
		}
	}
	if got := *slept; len(got) != 0 {
		t.Errorf("retries waited as polls: %v", got)
	}
}

func TestRetriesServerErrors(t *testing.T) {
	g := &gateway{steps: []step{answer(503, `{}`), answer(503, `{}`), answer(200, ok)}}
	c, _ := client(t, g)
	res := c.Call(t.Context(), "verify", "v-1", map[string]any{})
	if !res.Success || g.attempts() != 3 {
		t.Fatalf("result %+v after %d attempts, want success after 3", res, g.attempts())
	}
	if bodies, _, _ := g.seen(); bodies[0]["tool_call_id"] != "v-1" || bodies[2]["tool_call_id"] != "v-1" {
		t.Error("a retry changed the tool_call_id")
	}
}

func TestDoesNotRetryClientErrors(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 409} {
		g := &gateway{steps: []step{answer(status, `{"message":"No."}`), answer(200, ok)}}
		c, _ := client(t, g)
		if res := c.Call(t.Context(), "verify", "v", map[string]any{}); res.Success || res.Result != "No." || g.attempts() != 1 {
			t.Errorf("%d: result %+v after %d attempts, want the gateway's message after 1", status, res, g.attempts())
		}
	}
}

// The backoff would wait an hour; the gateway's Retry-After says now.
func TestRespectsRetryAfter(t *testing.T) {
	g := &gateway{steps: []step{answer(429, `{"message":"Slow down."}`, "Retry-After", "0"), answer(200, ok)}}
	c, _ := client(t, g)
	c.BaseDelay = time.Hour
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if res := c.Call(ctx, "verify", "v", map[string]any{}); !res.Success || g.attempts() != 2 {
		t.Errorf("result %+v after %d attempts", res, g.attempts())
	}
}

func TestCancelStopsRetrying(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	failAndCancel := func(w http.ResponseWriter, r *http.Request) { cancel(); answer(503, `{}`)(w, r) }
	g := &gateway{steps: []step{failAndCancel, answer(200, ok)}}
	c, _ := client(t, g)
	c.BaseDelay = time.Hour
	if res := c.Call(ctx, "verify", "v", map[string]any{}); res.Success || !strings.Contains(res.Result, "cancelled") || g.attempts() != 1 {
		t.Errorf("result %+v after %d attempts", res, g.attempts())
	}
}

func TestGivesUpAfterFiveRetries(t *testing.T) {
	g := &gateway{steps: []step{hangUp}}
	c, _ := client(t, g)
	res := c.Call(t.Context(), "verify", "v", map[string]any{})
	if res.Success || !strings.Contains(res.Result, "could not be reached") {
		t.Errorf("result %+v", res)
	}
	if g.attempts() != 1+MaxRetries {
		t.Errorf("%d attempts, want %d", g.attempts(), 1+MaxRetries)
	}
	if strings.Contains(res.Result, "127.0.0.1") || strings.Contains(res.Result, "s-1") {
		t.Errorf("the failure names the gateway: %q", res.Result)
	}
}

func TestPollsWhilePending(t *testing.T) {
	pending := answer(202, `{"status":"pending","tool_call_id":"v","retry_after_seconds":2}`)
	g := &gateway{steps: []step{pending, pending, answer(200, ok, "Idempotent-Replayed", "true")}}
	c, slept := client(t, g)
	res := c.Call(t.Context(), "verify", "v", map[string]any{})
	if !res.Success || !res.Replayed {
		t.Fatalf("result %+v", res)
	}
	if got := *slept; len(got) != 2 || got[0] != 2*time.Second {
		t.Errorf("polled after %v, want the retry_after", got)
	}
	if bodies, _, _ := g.seen(); bodies[2]["tool_call_id"] != "v" {
		t.Error("poll without the same id")
	}
}

func TestErrorsBecomeResults(t *testing.T) {
	refused := `{"status":403,"error_code":"forbidden","message":"save_env_files is only available in setup sessions.","retryable":false,"success":false,"result":"save_env_files is only available in setup sessions."}`
	g := &gateway{steps: []step{answer(403, refused)}}
	c, _ := client(t, g)
	res := c.Call(t.Context(), "save_env_files", "e", map[string]any{})
	if res.Success || res.Result != "save_env_files is only available in setup sessions." || g.attempts() != 1 {
		t.Errorf("result %+v after %d attempts", res, g.attempts())
	}

	busy := `{"status":503,"error_code":"service_unavailable","message":"The tool could not run; retry with the same tool_call_id.","retryable":true}`
	g = &gateway{steps: []step{answer(503, busy), answer(200, ok)}}
	c, _ = client(t, g)
	if res := c.Call(t.Context(), "verify", "v", map[string]any{}); !res.Success || g.attempts() != 2 {
		t.Errorf("a retryable error was not retried: %+v", res)
	}

	g = &gateway{steps: []step{answer(200, `not json`)}}
	c, _ = client(t, g)
	c.MaxRetries = 1
	if res := c.Call(t.Context(), "verify", "v", map[string]any{}); res.Success || g.attempts() != 2 {
		t.Errorf("unreadable result: %+v after %d", res, g.attempts())
	}
}

func TestEachAttemptHasItsOwnTimeout(t *testing.T) {
	// The first attempt is held until the client gives up on it (bounded, so that
	// a client that never does fails the test), then answered.
	slow := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		answer(200, ok)(w, r)
	}
	g := &gateway{steps: []step{slow, answer(200, ok)}}
	c, _ := client(t, g)
	c.AttemptTimeout = 50 * time.Millisecond
	res := c.Call(t.Context(), "verify", "v", map[string]any{})
	if !res.Success || g.attempts() != 2 {
		t.Errorf("result %+v after %d attempts", res, g.attempts())
	}
}

func TestCancelledCallReturnsAResult(t *testing.T) {
	g := &gateway{steps: []step{hangUp}}
	c, _ := client(t, g)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if res := c.Call(ctx, "verify", "v", map[string]any{}); res.Success || res.Result == "" {
		t.Errorf("result %+v", res)
	}
}
