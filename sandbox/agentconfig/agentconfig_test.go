package agentconfig_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
)

// write puts body in agent.json in a new folder and returns its path.
func write(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadLLM(t *testing.T) {
	c, _, err := agentconfig.Load(write(t, `{"llm":{"provider":"gemini","model":"gemini-2.5-pro","temperature":0.3,"max_tokens":1024}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.LLM.Provider != "gemini" || c.LLM.Temperature == nil || *c.LLM.Temperature != 0.3 || c.LLM.MaxTokens != 1024 {
		t.Errorf("llm %+v", c.LLM)
	}
	if got := c.LLM.KeyEnvs(); !slices.Equal(got, []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}) {
		t.Errorf("gemini's key variables %v", got)
	}
	c, _, err = agentconfig.Load(write(t, `{"llm":{"provider":"ollama","model":"llama3.2"}}`))
	if err != nil || c.LLM.Temperature != nil || c.LLM.KeyEnvs() != nil {
		t.Errorf("ollama: %+v, %v (no temperature, no key)", c.LLM, err)
	}
}

func TestLoadLLMErrors(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"llm":{"provider":"vertex"}}`, `llm.provider "vertex": want one of scripted, anthropic, openai, bedrock, gemini, mistral, ollama, openai-compatible`},
		{`{"llm":{"provider":"mistral","temperature":3}}`, "llm.temperature 3: want 0..2"},
		{`{"llm":{"provider":"mistral","temperature":-1}}`, "llm.temperature -1: want 0..2"},
		{`{"llm":{"provider":"mistral","temperature":"hot"}}`, "temperature"},
		{`{"llm":{"max_tokens":0}}`, "llm.max_tokens 0"},
	}
	for _, tt := range tests {
		_, _, err := agentconfig.Load(write(t, tt.body))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.body, err, tt.want)
		}
	}
}

func TestEveryProviderIsAccepted(t *testing.T) {
	for _, name := range agentconfig.Providers() {
		c := agentconfig.Defaults()
		c.LLM.Provider = name
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := agentconfig.LoadEnv(lookup(map[string]string{"RA_LLM_PROVIDER": name})); err != nil {
			t.Errorf("RA_LLM_PROVIDER=%s: %v", name, err)
		}
	}
}
