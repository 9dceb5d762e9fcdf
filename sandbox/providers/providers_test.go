package providers_test

import (
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/providers"
)

func TestNew(t *testing.T) {
	tests := []struct {
		cfg  agentconfig.LLM
		name string
		err  string
	}{
		{agentconfig.LLM{Provider: "scripted"}, "scripted", ""},
		{agentconfig.LLM{Provider: "anthropic", APIKey: "k", TimeoutSeconds: 10}, "anthropic", ""},
		{agentconfig.LLM{Provider: "anthropic", APIKeyEnv: "MY_KEY"}, "", "needs an API key in $MY_KEY"},
		{agentconfig.LLM{Provider: "openai"}, "", "needs an API key in $OPENAI_API_KEY"},
		{agentconfig.LLM{Provider: "gemini"}, "", "not available"},
		{agentconfig.LLM{Provider: "bedrock", Model: "claude-sonnet-4.5"}, "bedrock", ""},
		{agentconfig.LLM{Provider: "scripted", Script: "missing.jsonl"}, "", "load script"},
	}
	for _, tt := range tests {
		p, err := providers.New(tt.cfg, t.TempDir())
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%+v: %v, want %q", tt.cfg, err, tt.err)
			}
			continue
		}
		if err != nil || p.Name() != tt.name {
			t.Errorf("%+v: %v, %v", tt.cfg, p, err)
		}
	}
	if got := providers.ProviderModelID("bedrock", "claude-sonnet-4.5"); !strings.Contains(got, "anthropic.claude-sonnet-4-5") {
		t.Errorf("bedrock id %q", got)
	}
	if got := providers.ProviderModelID("anthropic", "my-own-model"); got != "my-own-model" {
		t.Errorf("unknown id rewritten to %q", got)
	}
}
