package agentconfig_test

import (
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
)

// lookup is an environment of the given variables.
func lookup(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestLoadEnvDefaults(t *testing.T) {
	e, err := agentconfig.LoadEnv(lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	if e.Workspace != "." || e.EnvFile != "/tmp/.proliferate_env.json" || e.Heartbeat != 10*time.Second || e.TokenLimit != 0 ||
		e.ContextWindow != agentconfig.DefaultContextWindow || e.LLM.Provider != "" || e.LLM.MaxTokens != agentconfig.Defaults().LLM.MaxTokens || e.Tmux != (agentconfig.Tmux{}) {
		t.Errorf("defaults: %+v", e)
	}
	if err := (agentconfig.Env{}).CheckSandbox(); err == nil {
		t.Error("a zero Env passes CheckSandbox")
	}
	err = e.CheckSandbox()
	for _, name := range []string{"PROLIFERATE_SESSION_ID", "PROLIFERATE_GATEWAY_URL", "SANDBOX_MCP_AUTH_TOKEN"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("CheckSandbox: %v, want %s named", err, name)
		}
	}
}

func TestLoadEnv(t *testing.T) {
	e, err := agentconfig.LoadEnv(lookup(map[string]string{
		"PROLIFERATE_SESSION_ID":  "s1",
		"PROLIFERATE_GATEWAY_URL": "http://gw.example/ ",
		"SANDBOX_MCP_AUTH_TOKEN":  "rsb_x",
		"RA_BOOTSTRAP_CODE":       "rbc_x",
		// The platform's old names are no sandbox's identity.
		"RA_SESSION_ID":          "old",
		"RA_GATEWAY_URL":         "http://old.example",
		"RA_SANDBOX_TOKEN":       "old",
		"RA_WORKSPACE":           "/w",
		"RA_HEARTBEAT_SECONDS":   "2.5",
		"RA_LLM_PROVIDER":        "openai",
		"RA_LLM_MODEL":           "gpt",
		"RA_LLM_API_KEY_ENV":     "MY_KEY",
		"MY_KEY":                 "sk-1",
		"OPENAI_API_KEY":         "not this one",
		"RA_LLM_BASE_URL":        "http://llm.example",
		"RA_LLM_SCRIPT":          "script.jsonl",
		"RA_TOKEN_LIMIT":         "1000",
		"RA_LLM_CONTEXT_WINDOW":  "8000",
		"RA_TMUX_SESSION_NAME":   "ra-s1",
		"RA_NO_TMUX":             "1",
		"RA_IN_TMUX":             "1",
		"RA_TMUX_SUPERVISOR_PID": "42",
		"RA_UNKNOWN":             "ignored",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := agentconfig.EnvDefaults()
	want.SessionID, want.GatewayURL, want.SandboxToken = "s1", "http://gw.example", "rsb_x"
	want.Workspace, want.EnvFile, want.Heartbeat = "/w", "/tmp/.proliferate_env.json", 2500*time.Millisecond
	want.LLM.Provider, want.LLM.Model, want.LLM.APIKeyEnv, want.LLM.APIKey = "openai", "gpt", "MY_KEY", "sk-1"
	want.LLM.BaseURL, want.LLM.Script = "http://llm.example", "script.jsonl"
	want.TokenLimit, want.ContextWindow = 1000, 8000
	want.Tmux = agentconfig.Tmux{SessionName: "ra-s1", Disabled: true, Inside: true, SupervisorPID: 42}
	if e.SessionID != want.SessionID || e.GatewayURL != want.GatewayURL || e.SandboxToken != want.SandboxToken ||
		e.Workspace != want.Workspace || e.EnvFile != want.EnvFile || e.Heartbeat != want.Heartbeat || e.LLM != want.LLM ||
		e.TokenLimit != want.TokenLimit || e.ContextWindow != want.ContextWindow || e.Tmux != want.Tmux {
		t.Errorf("got  %+v\nwant %+v", e, want)
	}
	if err := e.CheckSandbox(); err != nil {
		t.Error(err)
	}
	if got := e.Secret("MY_KEY"); got != "sk-1" {
		t.Errorf("Secret(MY_KEY) = %q", got)
	}
	if got := e.Secret(""); got != "" {
		t.Errorf("Secret(\"\") = %q", got)
	}
}

func TestLoadEnvValues(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		want func(agentconfig.Env) bool
	}{
		{"blank keeps the default", map[string]string{"RA_WORKSPACE": " ", "RA_LLM_PROVIDER": ""},
			func(e agentconfig.Env) bool { return e.Workspace == "." && e.LLM.Provider == "" }}, // no provider: none named
		{"job mode", map[string]string{"RA_JOB_ROOT": "/agent-space", "RA_JOB_NETWORK_ISOLATED": "1"},
			func(e agentconfig.Env) bool { return e.JobRoot == "/agent-space" && e.JobNetworkIsolated }},
		{"job mode's defaults", map[string]string{},
			func(e agentconfig.Env) bool { return e.JobRoot == "" && !e.JobNetworkIsolated }},
		{"env file outside the workspace", map[string]string{"RA_WORKSPACE": "/w/x"},
			func(e agentconfig.Env) bool { return e.EnvFile == "/tmp/.proliferate_env.json" }},
		{"env file named", map[string]string{"RA_WORKSPACE": "/w", "RA_ENV_FILE": "/etc/env.json"},
			func(e agentconfig.Env) bool { return e.EnvFile == "/etc/env.json" }},
		{"provider's usual key", map[string]string{"RA_LLM_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "k"},
			func(e agentconfig.Env) bool { return e.LLM.APIKey == "k" && e.LLM.KeyEnv() == "ANTHROPIC_API_KEY" }},
		{"no key for bedrock", map[string]string{"RA_LLM_PROVIDER": "bedrock", "ANTHROPIC_API_KEY": "k"},
			func(e agentconfig.Env) bool { return e.LLM.APIKey == "" }},
		{"gemini's key", map[string]string{"RA_LLM_PROVIDER": "gemini", "GEMINI_API_KEY": "g", "GOOGLE_API_KEY": "o"},
			func(e agentconfig.Env) bool { return e.LLM.APIKey == "g" && e.LLM.KeyEnv() == "GEMINI_API_KEY" }},
		{"gemini's key from GOOGLE_API_KEY", map[string]string{"RA_LLM_PROVIDER": "gemini", "GEMINI_API_KEY": "", "GOOGLE_API_KEY": "o"},
			func(e agentconfig.Env) bool { return e.LLM.APIKey == "o" }},
		{"mistral's key", map[string]string{"RA_LLM_PROVIDER": "mistral", "MISTRAL_API_KEY": "m", "OPENAI_API_KEY": "not this"},
			func(e agentconfig.Env) bool { return e.LLM.APIKey == "m" && e.LLM.KeyEnv() == "MISTRAL_API_KEY" }},
		{"no key for a local server", map[string]string{"RA_LLM_PROVIDER": "ollama", "OPENAI_API_KEY": "not this"},
			func(e agentconfig.Env) bool { return e.LLM.APIKey == "" && e.LLM.KeyEnv() == "" }},
		{"a local server's key when named", map[string]string{"RA_LLM_PROVIDER": "openai-compatible", "RA_LLM_API_KEY_ENV": "VLLM_KEY", "VLLM_KEY": "v"},
			func(e agentconfig.Env) bool { return e.LLM.APIKey == "v" }},
		{"temperature and max tokens", map[string]string{"RA_LLM_TEMPERATURE": "0.2", "RA_LLM_MAX_TOKENS": "8192"},
			func(e agentconfig.Env) bool {
				return e.LLM.Temperature != nil && *e.LLM.Temperature == 0.2 && e.LLM.MaxTokens == 8192
			}},
		{"temperature 0 is a temperature", map[string]string{"RA_LLM_TEMPERATURE": "0"},
			func(e agentconfig.Env) bool { return e.LLM.Temperature != nil && *e.LLM.Temperature == 0 }},
		{"no temperature: the model's default", nil,
			func(e agentconfig.Env) bool { return e.LLM.Temperature == nil }},
		{"token limit 0 is none", map[string]string{"RA_TOKEN_LIMIT": "0"},
			func(e agentconfig.Env) bool { return e.TokenLimit == 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := agentconfig.LoadEnv(lookup(tt.vars))
			if err != nil || !tt.want(e) {
				t.Errorf("%+v, %v", e, err)
			}
		})
	}
}

func TestLoadEnvErrorsNameTheVariable(t *testing.T) {
	tests := []struct{ name, value string }{
		{"RA_HEARTBEAT_SECONDS", "soon"},
		{"RA_HEARTBEAT_SECONDS", "0"},
		{"RA_HEARTBEAT_SECONDS", "-3"},
		{"RA_TOKEN_LIMIT", "-1"},
		{"RA_TOKEN_LIMIT", "lots"},
		{"RA_LLM_CONTEXT_WINDOW", "0"},
		{"RA_LLM_PROVIDER", "vertex"},
		{"RA_LLM_TEMPERATURE", "warm"},
		{"RA_LLM_TEMPERATURE", "2.5"},
		{"RA_LLM_TEMPERATURE", "-0.1"},
		{"RA_LLM_TEMPERATURE", "NaN"},
		{"RA_LLM_MAX_TOKENS", "0"},
		{"RA_LLM_MAX_TOKENS", "2000000"},
		{"RA_TMUX_SUPERVISOR_PID", "pid"},
	}
	for _, tt := range tests {
		_, err := agentconfig.LoadEnv(lookup(map[string]string{tt.name: tt.value}))
		if err == nil || !strings.HasPrefix(err.Error(), tt.name+": ") || !strings.Contains(err.Error(), tt.value) {
			t.Errorf("%s=%q: %v, want an error naming the variable and the value", tt.name, tt.value, err)
		}
	}
}

func FuzzLoadEnv(f *testing.F) {
	for _, v := range []string{"10", "0.5", "-1", "1e3", "NaN", "9999999999999999999", "", " 7 "} {
		f.Add(v)
	}
	names := []string{"RA_HEARTBEAT_SECONDS", "RA_TOKEN_LIMIT", "RA_LLM_CONTEXT_WINDOW", "RA_TMUX_SUPERVISOR_PID", "RA_LLM_PROVIDER", "RA_LLM_TEMPERATURE", "RA_LLM_MAX_TOKENS"}
	f.Fuzz(func(t *testing.T, v string) {
		for _, name := range names {
			e, err := agentconfig.LoadEnv(lookup(map[string]string{name: v}))
			switch {
			case err != nil && !strings.HasPrefix(err.Error(), name+": "):
				t.Errorf("%s=%q: error %q does not name the variable", name, v, err)
			case err == nil && (e.Heartbeat <= 0 || e.TokenLimit < 0 || e.ContextWindow <= 0 || e.Tmux.SupervisorPID < 0 ||
				e.LLM.MaxTokens < 1 || e.LLM.MaxTokens > 1_000_000 ||
				e.LLM.Temperature != nil && !(*e.LLM.Temperature >= 0 && *e.LLM.Temperature <= agentconfig.MaxTemperature)):
				t.Errorf("%s=%q accepted as %+v", name, v, e)
			}
		}
	})
}

// TestCheckSandboxPool: a sandbox runs a session or waits in the warm pool,
// exactly one of the two; a pool sandbox needs the gateway and its launch
// code, and takes no token.
func TestCheckSandboxPool(t *testing.T) {
	pool := map[string]string{"RA_POOL_SANDBOX": "pool-6f1c2a9e-4b7d-4e21-9a3c-0d5e8f7b6a41", "PROLIFERATE_GATEWAY_URL": "http://gw/", "RA_BOOTSTRAP_CODE": "rbc_launch"}
	with := func(changes map[string]string) map[string]string {
		vars := map[string]string{}
		for k, v := range pool {
			vars[k] = v
		}
		for k, v := range changes {
			vars[k] = v
		}
		return vars
	}
	tests := []struct {
		name string
		vars map[string]string
		want []string // what the error names; nil: no error
	}{
		{"pool only", pool, nil},
		{"both", with(map[string]string{"PROLIFERATE_SESSION_ID": "s1"}), []string{"PROLIFERATE_SESSION_ID", "RA_POOL_SANDBOX", "both"}},
		{"neither", with(map[string]string{"RA_POOL_SANDBOX": ""}), []string{"PROLIFERATE_SESSION_ID (or RA_POOL_SANDBOX)"}},
		{"no launch code", with(map[string]string{"RA_BOOTSTRAP_CODE": ""}), []string{"RA_BOOTSTRAP_CODE"}},
		{"a token instead of the launch code", with(map[string]string{"RA_BOOTSTRAP_CODE": "", "SANDBOX_MCP_AUTH_TOKEN": "rsb_x"}), []string{"SANDBOX_MCP_AUTH_TOKEN", "RA_POOL_SANDBOX"}},
		{"no gateway", with(map[string]string{"PROLIFERATE_GATEWAY_URL": ""}), []string{"PROLIFERATE_GATEWAY_URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := agentconfig.LoadEnv(lookup(tt.vars))
			if err != nil {
				t.Fatal(err)
			}
			if e.PoolSandbox != tt.vars["RA_POOL_SANDBOX"] {
				t.Errorf("PoolSandbox %q, want %q", e.PoolSandbox, tt.vars["RA_POOL_SANDBOX"])
			}
			err = e.CheckSandbox()
			if tt.want == nil {
				if err != nil {
					t.Errorf("CheckSandbox: %v", err)
				}
				return
			}
			for _, name := range tt.want {
				if err == nil || !strings.Contains(err.Error(), name) {
					t.Errorf("CheckSandbox: %v, want %q named", err, name)
				}
			}
		})
	}
	// The launch code is a secret like a session's bootstrap code: hidden and
	// removed from the agent's environment.
	e, _ := agentconfig.LoadEnv(lookup(pool))
	if got := e.Secrets([]string{"RA_BOOTSTRAP_CODE=rbc_launch", "RA_POOL_SANDBOX=pool-x"}); len(got) != 1 || got["RA_BOOTSTRAP_CODE"] != "rbc_launch" {
		t.Errorf("secrets %v, want the launch code only", got)
	}
}
