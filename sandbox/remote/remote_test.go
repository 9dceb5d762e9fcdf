package remote

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/retry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

func TestNewConfig(t *testing.T) {
	env, err := agentconfig.LoadEnv(func(k string) (string, bool) {
		v, ok := map[string]string{"PROLIFERATE_SESSION_ID": "s1", "PROLIFERATE_GATEWAY_URL": "http://gw/", "SANDBOX_MCP_AUTH_TOKEN": "tok",
			"RA_WORKSPACE": "/w", "RA_TOKEN_LIMIT": "9", "RA_LLM_MODEL": "m"}[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewConfig(env, []string{"PATH=/bin", "SANDBOX_MCP_AUTH_TOKEN=tok", "ANTHROPIC_API_KEY=sk-ant-key-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.SessionID != "s1" || c.Gateway != "http://gw" || c.Token != "tok" || c.Workspace != "/w" || c.EnvFile != "/tmp/.proliferate_env.json" ||
		c.Heartbeat != 10*time.Second || c.Poll != time.Second || c.TokenLimit != 9 || c.LLM.Model != "m" || c.ContextWindow != agentconfig.DefaultContextWindow {
		t.Errorf("config %+v", c)
	}
	if _, err := NewConfig(agentconfig.Env{}, nil, nil); err == nil || !strings.Contains(err.Error(), "PROLIFERATE_SESSION_ID") {
		t.Errorf("without identity: %v", err)
	}
	// The commands the agent runs get the host variables and the workspace,
	// never its token or a key.
	if got := c.Tools.Environ(); !slices.Equal(got, []string{"PATH=/bin", "WORKSPACE=/w"}) {
		t.Errorf("tools' environment %q", got)
	}
	// A tool user that cannot be had is an error, never tools run as the agent.
	for _, user := range []string{"root", "0", "no-such-user-of-this-host"} {
		env.ToolUser = user
		if _, err := NewConfig(env, nil, nil); err == nil || !strings.Contains(err.Error(), "RA_TOOL_USER") {
			t.Errorf("tool user %s: %v", user, err)
		}
	}
}

// TestModelCallsGoThroughTheGateway: a sandbox's hosted provider is the
// session's model route with the sandbox token as its key, whatever key and
// base URL its environment holds; local servers and the scripted provider
// are as configured. (agent run reads keys from the environment: see cli.)
func TestModelCallsGoThroughTheGateway(t *testing.T) {
	base := map[string]string{"PROLIFERATE_SESSION_ID": "s1", "PROLIFERATE_GATEWAY_URL": "http://gw/", "SANDBOX_MCP_AUTH_TOKEN": "rsb_tok",
		"ANTHROPIC_API_KEY": "sk-leaked", "OPENAI_API_KEY": "sk-leaked", "GEMINI_API_KEY": "leaked", "RA_LLM_BASE_URL": "http://elsewhere/v1", "MY_KEY": "sk-mine"}
	tests := []struct {
		provider, modelGateway, keyEnv string
		wantBase, wantKey              string
	}{
		{"anthropic", "", "", "http://gw/sandbox/s1/model/anthropic", "rsb_tok"},
		{"openai", "", "MY_KEY", "http://gw/sandbox/s1/model/openai", "rsb_tok"},
		{"gemini", "https://model.example/", "", "https://model.example/sandbox/s1/model/gemini", "rsb_tok"},
		{"mistral", "", "", "http://gw/sandbox/s1/model/mistral", "rsb_tok"},
		{"bedrock", "", "", "http://gw/sandbox/s1/model/bedrock", "rsb_tok"},
		{"ollama", "", "", "http://elsewhere/v1", ""},
		{"openai-compatible", "", "MY_KEY", "http://elsewhere/v1", "sk-mine"},
		{"scripted", "", "", "http://elsewhere/v1", ""},
	}
	for _, tt := range tests {
		vars := map[string]string{"RA_LLM_PROVIDER": tt.provider, "RA_MODEL_GATEWAY_URL": tt.modelGateway, "RA_LLM_API_KEY_ENV": tt.keyEnv}
		env, err := agentconfig.LoadEnv(func(k string) (string, bool) {
			if v, ok := vars[k]; ok {
				return v, true
			}
			v, ok := base[k]
			return v, ok
		})
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewConfig(env, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.LLM.BaseURL != tt.wantBase || c.LLM.APIKey != tt.wantKey || c.LLM.Provider != tt.provider {
			t.Errorf("%s: base URL %q key %q, want %q %q", tt.provider, c.LLM.BaseURL, c.LLM.APIKey, tt.wantBase, tt.wantKey)
		}
	}
}

// flaky is a gateway answering request i (from 0) with statuses[i], the last
// one repeating; 200 answers with orders to stop.
func flaky(t *testing.T, statuses ...int) (*client, *atomic.Int32) {
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
	return &client{c: Config{SessionID: "s1", Gateway: srv.URL, Token: "tok"}, http: srv.Client(),
		retry: retry.Policy{Retries: 4, Initial: time.Millisecond, Max: 2 * time.Millisecond}}, &n
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
		{"401 is not retried", []int{401, 200}, 1, func(err error) bool { _, ok := errors.AsType[*authError](err); return ok }},
		{"403 is not retried", []int{403, 200}, 1, func(err error) bool { _, ok := errors.AsType[*authError](err); return ok }},
		{"404 is not retried", []int{404, 200}, 1, func(err error) bool { return err != nil && strings.Contains(err.Error(), "gateway answered 404") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl, n := flaky(t, tt.statuses...)
			var orders sandboxwire.Orders
			err := cl.do(t.Context(), http.MethodPost, sandboxwire.RouteHeartbeat, struct{}{}, &orders)
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
	err := cl.do(ctx, http.MethodPost, sandboxwire.RouteHeartbeat, struct{}{}, &orders)
	if !errors.Is(err, context.DeadlineExceeded) || n.Load() != 1 {
		t.Errorf("%v after %d requests", err, n.Load())
	}
}

func TestMergeEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ws", ".proliferate_env.json")
	read := func() (map[string]string, os.FileMode) {
		t.Helper()
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]string
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return m, info.Mode().Perm()
	}
	if err := MergeEnv(path, map[string]string{"A": "1", "B": "2"}); err != nil {
		t.Fatal(err)
	}
	if m, mode := read(); len(m) != 2 || m["A"] != "1" || mode != 0o600 {
		t.Errorf("new file: %v, %v", m, mode)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MergeEnv(path, map[string]string{"B": "3", "C": "4"}); err != nil {
		t.Fatal(err)
	}
	if m, mode := read(); len(m) != 3 || m["A"] != "1" || m["B"] != "3" || m["C"] != "4" || mode != 0o600 {
		t.Errorf("merged: %v, %v", m, mode)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MergeEnv(path, map[string]string{"D": "5"}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("damaged file: %v", err)
	}
	if err := os.WriteFile(path, []byte("null"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MergeEnv(path, map[string]string{"D": "5"}); err != nil {
		t.Errorf("a file holding null: %v", err)
	}
}

// The env file lives in /tmp, which others may write: a link planted at its
// path is refused, and what it points at stays as it was.
func TestMergeEnvRefusesALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere.json")
	if err := os.WriteFile(target, []byte(`{"X":"1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ".proliferate_env.json")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := MergeEnv(path, map[string]string{"A": "secret"}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("merge through a link: %v", err)
	}
	raw, _ := os.ReadFile(target)
	info, _ := os.Stat(target)
	if string(raw) != `{"X":"1"}` || info.Mode().Perm() != 0o644 {
		t.Errorf("the link's target changed: %q %v", raw, info.Mode())
	}
	if link, err := os.Lstat(path); err != nil || link.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", link, err)
	}
}
