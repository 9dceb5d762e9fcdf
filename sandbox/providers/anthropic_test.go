package providers_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/providers"
	"github.com/remote-agents/remote-agents/sandbox/providers/providertest"
)

func TestAnthropicContract(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Anthropic(t), func(o providers.Options) llm.Provider {
		o.APIKey, o.Model = "test-key", "claude-sonnet-4.5"
		return providers.NewAnthropic(o)
	})
}
