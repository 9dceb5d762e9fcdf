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
