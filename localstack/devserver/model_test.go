package devserver_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/localstack/devserver"
)

// TestModelFromEnvKeepsKeysFromSandboxes: sandboxes of a hosted provider get
// its model settings and no key (the dev server's gateway holds it, read from
// the variable RA_LLM_API_KEY_ENV names if set, and RA_LLM_BASE_URL is its
// upstream); a local server's sandboxes get its address and key.
func TestModelFromEnvKeepsKeysFromSandboxes(t *testing.T) {
	t.Parallel()
	lookupOf := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	hosted := devserver.ModelFromEnv(lookupOf(map[string]string{
		"RA_LLM_PROVIDER": "anthropic", "RA_LLM_MODEL": "claude-sonnet-4.5", "RA_LLM_BASE_URL": "http://127.0.0.1:9000",
		"RA_LLM_API_KEY_ENV": "MY_ANTHROPIC_KEY", "MY_ANTHROPIC_KEY": "sk-ant-mine", "ANTHROPIC_API_KEY": "sk-ant-default", "OPENAI_API_KEY": "sk-openai",
	}))
	if want := []string{"RA_LLM_PROVIDER=anthropic", "RA_LLM_MODEL=claude-sonnet-4.5"}; !slices.Equal(hosted.SandboxEnv, want) {
		t.Errorf("sandbox env %v, want %v", hosted.SandboxEnv, want)
	}
	if key, _ := hosted.Keys("ANTHROPIC_API_KEY"); key != "sk-ant-mine" || hosted.Upstream != "http://127.0.0.1:9000" {
		t.Errorf("gateway key %q, upstream %q", key, hosted.Upstream)
	}
	if key, _ := hosted.Keys("OPENAI_API_KEY"); key != "sk-openai" {
		t.Errorf("another provider's key %q", key)
	}
	local := devserver.ModelFromEnv(lookupOf(map[string]string{
		"RA_LLM_PROVIDER": "openai-compatible", "RA_LLM_MODEL": "qwen3", "RA_LLM_BASE_URL": "http://127.0.0.1:8000/v1",
		"RA_LLM_API_KEY_ENV": "VLLM_KEY", "VLLM_KEY": "vllm-secret", "ANTHROPIC_API_KEY": "sk-ant-default",
	}))
	env := strings.Join(local.SandboxEnv, " ")
	if !strings.Contains(env, "RA_LLM_BASE_URL=http://127.0.0.1:8000/v1") || !strings.Contains(env, "VLLM_KEY=vllm-secret") || strings.Contains(env, "sk-ant") || local.Upstream != "" {
		t.Errorf("local server's sandbox env %v", local.SandboxEnv)
	}
	// A key variable of a hosted provider is never passed on, even named.
	named := devserver.ModelFromEnv(lookupOf(map[string]string{"RA_LLM_PROVIDER": "ollama", "RA_LLM_MODEL": "llama3.2", "RA_LLM_API_KEY_ENV": "OPENAI_API_KEY", "OPENAI_API_KEY": "sk-openai"}))
	if strings.Contains(strings.Join(named.SandboxEnv, " "), "sk-openai") {
		t.Errorf("sandbox env %v holds a hosted provider's key", named.SandboxEnv)
	}
	if d := devserver.ModelFromEnv(lookupOf(nil)); d.Provider != "scripted" || !slices.Equal(d.SandboxEnv, []string{"RA_LLM_PROVIDER=scripted"}) {
		t.Errorf("defaults %+v", d)
	}
}

// make dev runs agent tools as another user than the agent's whenever it
// can (as root), as Fargate does; RA_TOOL_USER, empty included, decides.
func TestToolUser(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	exists := func(name string) bool { return name == "nobody" }
	for _, tt := range []struct {
		name   string
		lookup func(string) (string, bool)
		euid   int
		want   string
	}{
		{"root, unset", env(), 0, "nobody"},
		{"not root, unset", env(), 1000, ""},
		{"set", env("RA_TOOL_USER", "agent"), 0, "agent"},
		{"set empty: the agent's user", env("RA_TOOL_USER", ""), 0, ""},
	} {
		if got, why := devserver.ToolUser(tt.lookup, tt.euid, exists); got != tt.want || why == "" {
			t.Errorf("%s: %q (%s), want %q", tt.name, got, why, tt.want)
		}
	}
	if got, _ := devserver.ToolUser(env(), 0, func(string) bool { return false }); got != "" {
		t.Errorf("root without a nobody user: %q, want none", got)
	}
}
