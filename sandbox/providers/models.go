package providers

// models maps canonical model IDs (what configuration and the platform use) to
// each provider's own ID. An ID not listed is passed to the provider unchanged.
var models = map[string]map[string]string{
	"claude-opus-4.5": {
		"anthropic": "claude-opus-4-5",
		"bedrock":   "us.anthropic.claude-opus-4-5-20251101-v1:0",
		"openai":    "anthropic/claude-opus-4-5", // through LiteLLM
	},
	"claude-sonnet-4.5": {
		"anthropic": "claude-sonnet-4-5",
		"bedrock":   "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
		"openai":    "anthropic/claude-sonnet-4-5",
	},
	"claude-haiku-4.5": {
		"anthropic": "claude-haiku-4-5",
		"bedrock":   "us.anthropic.claude-haiku-4-5-20251001-v1:0",
		"openai":    "anthropic/claude-haiku-4-5",
	},
	"gpt-5": {
		"openai": "gpt-5",
	},
	"gpt-4.1": {
		"openai": "gpt-4.1",
	},
}

// ProviderModelID returns provider's ID for a canonical model ID.
func ProviderModelID(provider, canonical string) string {
	if ids, ok := models[canonical]; ok {
		if id, ok := ids[provider]; ok {
			return id
		}
	}
	return canonical
}
