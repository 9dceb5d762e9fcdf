package providers

// models maps canonical model IDs (what configuration and the platform use) to
// each provider's own ID ("openai" is the ID through LiteLLM, the usual proxy
// behind an OpenAI-compatible base URL). An ID not listed, or a provider not
// listed for it (ollama, openai-compatible), is passed unchanged.
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
	"gemini-2.5-pro": {
		"gemini": "gemini-2.5-pro",
		"openai": "gemini/gemini-2.5-pro",
	},
	"gemini-2.5-flash": {
		"gemini": "gemini-2.5-flash",
		"openai": "gemini/gemini-2.5-flash",
	},
	"mistral-large": {
		"mistral": "mistral-large-latest",
		"openai":  "mistral/mistral-large-latest",
	},
	"mistral-medium": {
		"mistral": "mistral-medium-latest",
		"openai":  "mistral/mistral-medium-latest",
	},
	"devstral-medium": {
		"mistral": "devstral-medium-latest",
		"openai":  "mistral/devstral-medium-latest",
	},
}

// defaultModels are the canonical models of hosted providers.
var defaultModels = map[string]string{
	"anthropic": "claude-sonnet-4.5",
	"bedrock":   "claude-sonnet-4.5",
	"openai":    "gpt-5",
	"gemini":    "gemini-2.5-pro",
	"mistral":   "mistral-large",
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

// DefaultModel is the canonical model provider uses when llm.model is empty;
// "" for local servers (ollama, openai-compatible), whose models are their own
// and must be named, and for the scripted provider.
func DefaultModel(provider string) string { return defaultModels[provider] }
