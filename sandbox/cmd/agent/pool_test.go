package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// A sandbox launched into the warm pool (RA_POOL_SANDBOX and a launch code,
// no session) spends its launch code for its pool key, heart-beats with the
// key, and exits 0 when the pool tells it to stop; the launch code leaves its
// environment and its logs.
func TestSandboxInThePool(t *testing.T) {
	const id, launch, key = "pool-6f1c2a9e-4b7d-4e21-9a3c-0d5e8f7b6a41", "rbc_launch_code", "rpk_pool_key"
	var mu sync.Mutex
	var calls []string
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		switch r.URL.Path + " " + r.Header.Get("Authorization") {
		case sandboxwire.PoolPrefix + id + "/bootstrap Bearer " + launch:
			_ = json.NewEncoder(w).Encode(sandboxwire.PoolBootstrapResponse{PoolKey: key})
		case sandboxwire.PoolPrefix + id + "/heartbeat Bearer " + key:
			_ = json.NewEncoder(w).Encode(sandboxwire.PoolOrders{Stop: true})
		default:
			http.Error(w, `{"error_code":"invalid_token"}`, http.StatusUnauthorized)
		}
	}))
	defer gateway.Close()
	for k, v := range map[string]string{
		"RA_POOL_SANDBOX": id, "RA_BOOTSTRAP_CODE": launch, "PROLIFERATE_GATEWAY_URL": gateway.URL,
		"PROLIFERATE_SESSION_ID": "", "SANDBOX_MCP_AUTH_TOKEN": "", "RA_PUSH_URL": "", "RA_WORKSPACE": t.TempDir(),
		"RA_NO_TMUX": "1", "RA_IN_TMUX": "", "RA_TMUX_SUPERVISOR_PID": "", "RA_TMUX_LOG_PIPE": "", "RA_LLM_PROVIDER": "scripted",
	} {
		t.Setenv(k, v)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"sandbox"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{sandboxwire.PoolPrefix + id + "/bootstrap Bearer " + launch, sandboxwire.PoolPrefix + id + "/heartbeat Bearer " + key}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls %q, want %q", calls, want)
	}
	if v, ok := os.LookupEnv("RA_BOOTSTRAP_CODE"); ok {
		t.Errorf("the launch code is still in the environment: %q", v)
	}
	if strings.Contains(stderr.String(), launch) || strings.Contains(stderr.String(), key) {
		t.Errorf("a secret in the logs: %q", stderr.String())
	}
}
