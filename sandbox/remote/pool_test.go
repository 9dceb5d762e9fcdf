package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/gateway"
	"github.com/remote-agents/remote-agents/sandbox/poolwait"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// The warm pool's identities in these tests.
const (
	testPoolID   = "pool-6f1c2a9e-4b7d-4e21-9a3c-0d5e8f7b6a41"
	testLaunch   = "rbc_launch"
	testPoolKey  = "rpk_pool_key"
	testSessionA = "0b7f4c2e-1d3a-4f5b-8c6d-7e8f9a0b1c2d"
	testSessionB = "5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d"
)

// poolPlatform plays the platform for a pool sandbox: the pool's bootstrap
// and heartbeat, the push channel (pool and session connections), the
// sessions' bootstrap with the pool key, and the claimed session's routes
// (the cold run's platform, its paths rewritten).
type poolPlatform struct {
	t       *testing.T
	session *platform
	// orders answers pool heartbeat n (from 0): a status, and the orders
	// when it is 200.
	orders func(n int) (int, sandboxwire.PoolOrders)
	// stale are the sessions whose bootstrap refuses the pool key.
	stale map[string]bool
	// poolConns brings each pool push connection; poolClosed says one
	// ended.
	poolConns  chan *websocket.Conn
	poolClosed chan struct{}
	// seen brings every call as recorded in calls.
	seen chan string
	// refusePool refuses every pool push connection.
	refusePool bool

	mu          sync.Mutex
	calls       []string // "METHOD path bearer", "WS param=value bearer"
	heartbeats  int
	launchSpent bool
	claimed     string
}

func newPoolPlatform(t *testing.T, orders func(n int) (int, sandboxwire.PoolOrders)) *poolPlatform {
	return &poolPlatform{t: t, session: &platform{}, orders: orders, stale: map[string]bool{},
		poolConns: make(chan *websocket.Conn, 4), poolClosed: make(chan struct{}, 4), seen: make(chan string, 4096)}
}

// idle answers every pool heartbeat with no orders.
func idle(int) (int, sandboxwire.PoolOrders) { return http.StatusOK, sandboxwire.PoolOrders{} }

func (p *poolPlatform) record(call string) {
	p.mu.Lock()
	p.calls = append(p.calls, call)
	p.mu.Unlock()
	select {
	case p.seen <- call:
	default:
	}
}

func (p *poolPlatform) snapshot() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// waitFor waits until call is recorded (after those waited for already).
func (p *poolPlatform) waitFor(ctx context.Context, call string) {
	p.t.Helper()
	for {
		select {
		case c := <-p.seen:
			if c == call {
				return
			}
		case <-ctx.Done():
			p.t.Fatalf("waiting for %q: %v; calls %q", call, ctx.Err(), p.snapshot())
		}
	}
}

func bearer(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func (p *poolPlatform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch path := r.URL.Path; {
	case path == "/push":
		p.push(w, r)
	case strings.HasPrefix(path, sandboxwire.PoolPrefix):
		p.record(r.Method + " " + path + " " + bearer(r))
		p.pool(w, r)
	case strings.HasSuffix(path, "/"+sandboxwire.RouteBootstrap):
		p.record(r.Method + " " + path + " " + bearer(r))
		p.sessionBootstrap(w, r)
	default:
		p.record(r.Method + " " + path + " " + bearer(r))
		p.sessionRoute(w, r)
	}
}

// pool serves the pool sandbox's routes.
func (p *poolPlatform) pool(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case sandboxwire.PoolPrefix + testPoolID + "/" + sandboxwire.RouteBootstrap:
		if len(body) > 0 {
			p.t.Errorf("pool bootstrap with a body: %s", body)
		}
		if bearer(r) != testLaunch || p.launchSpent {
			http.Error(w, `{"error_code":"invalid_code"}`, http.StatusUnauthorized)
			return
		}
		p.launchSpent = true
		_ = json.NewEncoder(w).Encode(sandboxwire.PoolBootstrapResponse{PoolKey: testPoolKey})
	case sandboxwire.PoolPrefix + testPoolID + "/" + sandboxwire.RouteHeartbeat:
		var in sandboxwire.PoolHeartbeat
		if err := json.Unmarshal(body, &in); err != nil || !in.Idle {
			p.t.Errorf("pool heartbeat %s: want idle", body)
		}
		if bearer(r) != testPoolKey {
			http.Error(w, `{"error_code":"invalid_token"}`, http.StatusUnauthorized)
			return
		}
		status, orders := p.orders(p.heartbeats)
		p.heartbeats++
		if status != http.StatusOK {
			http.Error(w, `{"error_code":"nope"}`, status)
			return
		}
		_ = json.NewEncoder(w).Encode(orders)
	default:
		http.NotFound(w, r)
	}
}

// sessionBootstrap exchanges the pool key as a session's bootstrap code,
// once; a stale session refuses it.
func (p *poolPlatform) sessionBootstrap(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	session := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, sandboxwire.Prefix), "/"+sandboxwire.RouteBootstrap)
	if bearer(r) != testPoolKey || p.stale[session] || p.claimed != "" {
		http.Error(w, `{"error_code":"invalid_code"}`, http.StatusUnauthorized)
		return
	}
	p.claimed = session
	_ = json.NewEncoder(w).Encode(sandboxwire.BootstrapResponse{SandboxToken: "rsb_token", Generation: 1})
}

// sessionRoute serves the claimed session's routes as the cold run's
// platform does its session's.
func (p *poolPlatform) sessionRoute(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	claimed := p.claimed
	p.mu.Unlock()
	prefix := sandboxwire.Prefix + claimed + "/"
	if claimed == "" || !strings.HasPrefix(r.URL.Path, prefix) {
		http.NotFound(w, r)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/sandbox/s1/" + strings.TrimPrefix(r.URL.Path, prefix)
	p.session.ServeHTTP(w, r2)
}

// push accepts the pool sandbox's connection (its id, its pool key) and the
// claimed session's (its id, its token), and holds them until the sandbox
// closes them.
func (p *poolPlatform) push(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	claimed := p.claimed
	p.mu.Unlock()
	var isPool bool
	switch {
	case q.Has(sandboxwire.PushPoolParam):
		p.record("WS " + sandboxwire.PushPoolParam + "=" + q.Get(sandboxwire.PushPoolParam) + " " + bearer(r))
		isPool = q.Get(sandboxwire.PushPoolParam) == testPoolID && bearer(r) == testPoolKey
	default:
		p.record("WS " + sandboxwire.PushSessionParam + "=" + q.Get(sandboxwire.PushSessionParam) + " " + bearer(r))
		if claimed == "" || q.Get(sandboxwire.PushSessionParam) != claimed || bearer(r) != "rsb_token" {
			http.Error(w, "refused", http.StatusUnauthorized)
			return
		}
	}
	if q.Has(sandboxwire.PushPoolParam) && (!isPool || p.refusePool) {
		http.Error(w, "refused", http.StatusUnauthorized)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		p.t.Errorf("accept: %v", err)
		return
	}
	defer func() { _ = c.CloseNow() }()
	if isPool {
		p.poolConns <- c
		defer func() { p.poolClosed <- struct{}{} }()
	}
	for {
		if _, _, err := c.Read(context.Background()); err != nil {
			return
		}
	}
}

// poolConfig is a pool sandbox's configuration against gateway; pushURL ""
// for none. Heartbeats are rare: only a connect (or the poll period, without
// a push channel) makes one. The claimed session's platform pushes nothing:
// its inbox is polled even while its push connection is up.
func poolConfig(t *testing.T, gateway, pushURL string) Config {
	ws := t.TempDir()
	return Config{
		PoolSandbox: testPoolID, Gateway: gateway, BootstrapCode: testLaunch, Workspace: ws, PushURL: pushURL,
		Heartbeat: time.Minute, Poll: 5 * time.Millisecond, PushedPoll: 5 * time.Millisecond, EnvFile: filepath.Join(ws, ".proliferate_env.json"),
		LLM: agentconfig.LLM{Provider: "scripted"}, ContextWindow: 1000, Secrets: redact.New(),
	}
}

// startPool serves p and runs a pool sandbox against it (with a push channel
// if push); the channel brings Run's result.
func startPool(ctx context.Context, t *testing.T, p *poolPlatform, push bool) (Config, <-chan error) {
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	pushURL := ""
	if push {
		pushURL = "ws" + strings.TrimPrefix(srv.URL, "http") + "/push"
	}
	c := poolConfig(t, srv.URL, pushURL)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	return c, done
}

// assigned pushes an assigned frame naming session over c.
func assigned(ctx context.Context, t *testing.T, c *websocket.Conn, session string) {
	t.Helper()
	raw, _ := json.Marshal(sandboxwire.Push{Type: sandboxwire.PushAssigned, Session: session})
	if err := c.Write(ctx, websocket.MessageText, raw); err != nil {
		t.Fatalf("push assigned: %v", err)
	}
}

// result waits for Run's result.
func result(ctx context.Context, t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		t.Fatalf("Run did not return: %v", ctx.Err())
		return nil
	}
}

// Calls of the pool sandbox and the sessions, as poolPlatform records them.
var (
	callPoolBootstrap = "POST " + sandboxwire.PoolPrefix + testPoolID + "/bootstrap " + testLaunch
	callPoolHeartbeat = "POST " + sandboxwire.PoolPrefix + testPoolID + "/heartbeat " + testPoolKey
	callPoolPush      = "WS pool_sandbox=" + testPoolID + " " + testPoolKey
)

func callBootstrap(session string) string {
	return "POST /sandbox/" + session + "/bootstrap " + testPoolKey
}
func callSpec(session string) string { return "GET /sandbox/" + session + "/spec rsb_token" }

// checkSessionLife checks that after the calls want, the sandbox lived the
// session's life: ready reported on the session's route with its token, its
// own push connection, no pool call after the claim.
func checkSessionLife(t *testing.T, p *poolPlatform, session string, want []string) {
	t.Helper()
	calls := p.snapshot()
	if len(calls) < len(want) || !slices.Equal(calls[:len(want)], want) {
		t.Fatalf("calls %q\nwant first %q", calls[:min(len(calls), len(want)+2)], want)
	}
	rest := calls[len(want):]
	for _, c := range rest {
		if strings.Contains(c, sandboxwire.PoolPrefix) || strings.Contains(c, testPoolKey) {
			t.Errorf("pool call %q after the claim", c)
		}
	}
	if !slices.Contains(rest, "POST /sandbox/"+session+"/status rsb_token") {
		t.Errorf("no status report on the session's route: %q", rest)
	}
	p.session.mu.Lock()
	defer p.session.mu.Unlock()
	if len(p.session.states) < 2 || p.session.states[0].State != sandboxwire.Ready || p.session.states[len(p.session.states)-1].State != sandboxwire.Ended {
		t.Errorf("states %+v: want ready, then ended", p.session.states)
	}
}

// TestPoolSandboxClaimedByPush: a pool sandbox spends its launch code, connects
// to the push channel as its pool sandbox with its pool key, says idle, and on
// an assigned frame bootstraps that session with its pool key; from then on it
// is the session's (spec, ready, the session's push connection, its token),
// and its pool connection is closed.
func TestPoolSandboxClaimedByPush(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p := newPoolPlatform(t, idle)
	c, done := startPool(ctx, t, p, true)
	conn := <-p.poolConns
	p.waitFor(ctx, callPoolHeartbeat)
	assigned(ctx, t, conn, testSessionA)
	if err := result(ctx, t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkSessionLife(t, p, testSessionA, []string{callPoolBootstrap, callPoolPush, callPoolHeartbeat, callBootstrap(testSessionA), callSpec(testSessionA)})
	if calls := p.snapshot(); !slices.Contains(calls, "WS session_id="+testSessionA+" rsb_token") {
		t.Errorf("no session push connection: %q", calls)
	}
	select {
	case <-p.poolClosed:
	case <-ctx.Done():
		t.Error("the pool push connection was never closed")
	}
	if got := c.Secrets.String("key " + testPoolKey); strings.Contains(got, testPoolKey) {
		t.Errorf("the pool key is not hidden: %q", got)
	}
}

// TestPoolSandboxClaimedByHeartbeat: without a push channel a pool sandbox
// heart-beats at once, then as often as it polls; a failed heartbeat (503)
// is retried, and an answer naming a session is the claim.
func TestPoolSandboxClaimedByHeartbeat(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p := newPoolPlatform(t, func(n int) (int, sandboxwire.PoolOrders) {
		switch {
		case n == 0:
			return http.StatusServiceUnavailable, sandboxwire.PoolOrders{}
		case n < 3:
			return http.StatusOK, sandboxwire.PoolOrders{}
		}
		return http.StatusOK, sandboxwire.PoolOrders{SessionID: testSessionB}
	})
	_, done := startPool(ctx, t, p, false)
	if err := result(ctx, t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkSessionLife(t, p, testSessionB, []string{callPoolBootstrap, callPoolHeartbeat, callPoolHeartbeat, callPoolHeartbeat, callPoolHeartbeat,
		callBootstrap(testSessionB), callSpec(testSessionB)})
	for _, c := range p.snapshot() {
		if strings.HasPrefix(c, "WS ") {
			t.Errorf("a push connection without a push channel: %q", c)
		}
	}
}

// TestPoolSandboxWithoutItsPushConnection: a pool sandbox whose push
// connection fails heart-beats as often as it polls instead, and is claimed
// through a heartbeat's answer.
func TestPoolSandboxWithoutItsPushConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	p := newPoolPlatform(t, func(n int) (int, sandboxwire.PoolOrders) {
		if n < 2 {
			return http.StatusOK, sandboxwire.PoolOrders{}
		}
		return http.StatusOK, sandboxwire.PoolOrders{SessionID: testSessionA}
	})
	p.refusePool = true
	_, done := startPool(ctx, t, p, true)
	if err := result(ctx, t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var pool []string
	for _, c := range p.snapshot() {
		if c == callPoolHeartbeat || c == callBootstrap(testSessionA) {
			pool = append(pool, c)
		}
	}
	if want := []string{callPoolHeartbeat, callPoolHeartbeat, callPoolHeartbeat, callBootstrap(testSessionA)}; !slices.Equal(pool, want) {
		t.Errorf("pool calls %q, want %q", pool, want)
	}
	if calls := p.snapshot(); !slices.Contains(calls, callPoolPush) || !slices.Contains(calls, callSpec(testSessionA)) {
		t.Errorf("calls %q: want a pool push connection tried, then the session's spec", calls)
	}
}

// TestPoolSandboxIgnoresStaleAssignments: an assigned frame without a valid
// session id is a heartbeat (never a call on its path), a session whose
// bootstrap refuses the pool key is ignored, and a later assignment claims
// the sandbox.
func TestPoolSandboxIgnoresStaleAssignments(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p := newPoolPlatform(t, idle)
	p.stale[testSessionA] = true
	_, done := startPool(ctx, t, p, true)
	conn := <-p.poolConns
	p.waitFor(ctx, callPoolHeartbeat)
	assigned(ctx, t, conn, "../"+testSessionA)
	p.waitFor(ctx, callPoolHeartbeat)
	assigned(ctx, t, conn, testSessionA)
	p.waitFor(ctx, callBootstrap(testSessionA))
	assigned(ctx, t, conn, testSessionB)
	if err := result(ctx, t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkSessionLife(t, p, testSessionB, []string{callPoolBootstrap, callPoolPush, callPoolHeartbeat, callPoolHeartbeat,
		callBootstrap(testSessionA), callBootstrap(testSessionB), callSpec(testSessionB)})
}

// TestPoolSandboxStops: told to stop by a heartbeat's answer, or forgotten by
// the pool (401, 403, 404), a pool sandbox ends Run with nil, having called
// nothing of any session.
func TestPoolSandboxStops(t *testing.T) {
	tests := []struct {
		name   string
		status int
		orders sandboxwire.PoolOrders
	}{
		{"stop", http.StatusOK, sandboxwire.PoolOrders{Stop: true}},
		{"stop wins over a session", http.StatusOK, sandboxwire.PoolOrders{Stop: true, SessionID: testSessionA}},
		{"401", http.StatusUnauthorized, sandboxwire.PoolOrders{}},
		{"403", http.StatusForbidden, sandboxwire.PoolOrders{}},
		{"404", http.StatusNotFound, sandboxwire.PoolOrders{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			p := newPoolPlatform(t, func(n int) (int, sandboxwire.PoolOrders) {
				if n == 0 {
					return http.StatusOK, sandboxwire.PoolOrders{}
				}
				return tt.status, tt.orders
			})
			_, done := startPool(ctx, t, p, false)
			if err := result(ctx, t, done); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if calls := p.snapshot(); !slices.Equal(calls, []string{callPoolBootstrap, callPoolHeartbeat, callPoolHeartbeat}) {
				t.Errorf("calls %q", calls)
			}
		})
	}
}

// TestPoolSandboxStopsOnSignal: SIGTERM (ctx) while waiting ends Run with
// nil at once.
func TestPoolSandboxStopsOnSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	p := newPoolPlatform(t, idle)
	_, done := startPool(runCtx, t, p, true)
	<-p.poolConns
	p.waitFor(ctx, callPoolHeartbeat)
	stop()
	if err := result(ctx, t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-p.poolClosed:
	case <-ctx.Done():
		t.Error("the pool push connection was never closed")
	}
}

// TestPoolSandboxLaunchCodeRefused: a launch code the pool refuses (spent,
// expired) ends Run with the refusal, before anything else.
func TestPoolSandboxLaunchCodeRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p := newPoolPlatform(t, idle)
	p.launchSpent = true
	_, done := startPool(ctx, t, p, true)
	err := result(ctx, t, done)
	if _, ok := errors.AsType[*gateway.AuthError](err); !ok {
		t.Errorf("Run: %v, want the refusal", err)
	}
	if calls := p.snapshot(); !slices.Equal(calls, []string{callPoolBootstrap}) {
		t.Errorf("calls %q", calls)
	}
}

// TestClaimedConfig: once claimed, the sandbox is its session's, with its
// token, and its model route is that session's when the provider goes
// through the gateway.
func TestClaimedConfig(t *testing.T) {
	env, err := agentconfig.LoadEnv(func(k string) (string, bool) {
		v, ok := map[string]string{"RA_POOL_SANDBOX": testPoolID, "PROLIFERATE_GATEWAY_URL": "http://gw/", "RA_BOOTSTRAP_CODE": testLaunch,
			"RA_MODEL_GATEWAY_URL": "https://model.example", "RA_LLM_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "sk-leaked"}[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewConfig(env, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.PoolSandbox != testPoolID || c.SessionID != "" || c.BootstrapCode != testLaunch || c.Token != "" {
		t.Errorf("pool config %+v", c)
	}
	got := claimed(c, poolwait.Claim{Session: testSessionA, Token: "rsb_tok"})
	if got.SessionID != testSessionA || got.Token != "rsb_tok" || got.BootstrapCode != "" ||
		got.LLM.BaseURL != fmt.Sprintf("https://model.example/sandbox/%s/model/anthropic", testSessionA) || got.LLM.APIKey != "rsb_tok" {
		t.Errorf("claimed config: session %q token %q code %q model %q key %q", got.SessionID, got.Token, got.BootstrapCode, got.LLM.BaseURL, got.LLM.APIKey)
	}
	c.LLM = agentconfig.LLM{Provider: "ollama", BaseURL: "http://local/v1"}
	if got := claimed(c, poolwait.Claim{Session: testSessionA, Token: "rsb_tok"}); got.LLM.BaseURL != "http://local/v1" || got.LLM.APIKey != "" {
		t.Errorf("a local model changed: %+v", got.LLM)
	}
}
