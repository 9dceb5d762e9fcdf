package remote

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
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
