package poolwait

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/gateway"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

const (
	poolID  = "pool-1"
	launch  = "rbc_launch"
	poolKey = "rpk_pool_key_0123456789"
	session = "0b7f4c2e-1d3a-4f5b-8c6d-7e8f9a0b1c2d"
)

// poolGateway plays the platform's pool routes without a push channel: the launch
// code's exchange (refused if spent), heartbeats answered by answer(n), and
// the session's bootstrap with the pool key.
type poolGateway struct {
	spent  bool
	answer func(n int) (int, sandboxwire.PoolOrders)

	mu    sync.Mutex
	n     int
	calls []string
}

func (p *poolGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.calls = append(p.calls, r.URL.Path+" "+bearer)
	switch r.URL.Path {
	case sandboxwire.PoolPrefix + poolID + "/" + sandboxwire.RouteBootstrap:
		if bearer != launch || p.spent {
			http.Error(w, "{}", http.StatusUnauthorized)
			return
		}
		p.spent = true
		_ = json.NewEncoder(w).Encode(sandboxwire.PoolBootstrapResponse{PoolKey: poolKey})
	case sandboxwire.PoolPrefix + poolID + "/" + sandboxwire.RouteHeartbeat:
		status, orders := p.answer(p.n)
		p.n++
		if status != http.StatusOK {
			http.Error(w, "{}", status)
			return
		}
		_ = json.NewEncoder(w).Encode(orders)
	case sandboxwire.Prefix + session + "/" + sandboxwire.RouteBootstrap:
		_ = json.NewEncoder(w).Encode(sandboxwire.BootstrapResponse{SandboxToken: "rsb_token", Generation: 1})
	default:
		http.NotFound(w, r)
	}
}

// TestWait: without a push channel a pool sandbox spends its launch code,
// heart-beats with its pool key until an answer names a session or tells it
// to stop, and claims the session with its pool key, which it hides from then
// on; a refused launch code ends the wait with the refusal.
func TestWait(t *testing.T) {
	idleThen := func(orders sandboxwire.PoolOrders, status int) func(int) (int, sandboxwire.PoolOrders) {
		return func(n int) (int, sandboxwire.PoolOrders) {
			if n == 0 {
				return http.StatusOK, sandboxwire.PoolOrders{}
			}
			return status, orders
		}
	}
	heartbeat := sandboxwire.PoolPrefix + poolID + "/" + sandboxwire.RouteHeartbeat + " " + poolKey
	bootstrap := sandboxwire.PoolPrefix + poolID + "/" + sandboxwire.RouteBootstrap + " " + launch
	tests := []struct {
		name      string
		spent     bool
		answer    func(int) (int, sandboxwire.PoolOrders)
		wantClaim bool
		wantErr   bool
		calls     []string
	}{
		{"claimed", false, idleThen(sandboxwire.PoolOrders{SessionID: session}, http.StatusOK), true, false,
			[]string{bootstrap, heartbeat, heartbeat, sandboxwire.Prefix + session + "/" + sandboxwire.RouteBootstrap + " " + poolKey}},
		{"told to stop", false, idleThen(sandboxwire.PoolOrders{Stop: true}, http.StatusOK), false, false, []string{bootstrap, heartbeat, heartbeat}},
		{"forgotten", false, idleThen(sandboxwire.PoolOrders{}, http.StatusNotFound), false, false, []string{bootstrap, heartbeat, heartbeat}},
		{"launch code refused", true, nil, false, true, []string{bootstrap}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &poolGateway{spent: tt.spent, answer: tt.answer}
			srv := httptest.NewServer(p)
			defer srv.Close()
			secrets := redact.New()
			c := Config{PoolSandbox: poolID, LaunchCode: launch, Heartbeat: time.Minute, Poll: time.Millisecond, Workspace: t.TempDir(), Secrets: secrets}
			claim, err := Wait(t.Context(), gateway.New(srv.URL, "", "", secrets), c, slog.New(slog.DiscardHandler))
			if _, refused := errors.AsType[*gateway.AuthError](err); refused != tt.wantErr || (err != nil && !tt.wantErr) {
				t.Fatalf("Wait: %v", err)
			}
			if (claim != nil) != tt.wantClaim || (claim != nil && (claim.Session != session || claim.Token != "rsb_token")) {
				t.Errorf("claim %+v", claim)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if !slices.Equal(p.calls, tt.calls) {
				t.Errorf("calls %q\nwant %q", p.calls, tt.calls)
			}
			if !tt.wantErr && strings.Contains(secrets.String(poolKey), poolKey) {
				t.Error("the pool key is not hidden")
			}
		})
	}
}
