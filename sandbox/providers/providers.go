// Package providers builds the configured model provider: Anthropic, OpenAI
// (and servers compatible with it), Bedrock, Gemini and Mistral through native
// SDKs, local OpenAI-compatible servers (Ollama, vLLM…), or the scripted
// provider. One contract suite (package providertest) runs against each, over a
// local server speaking its wire format.
package providers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/llm"
)

// New returns the provider cfg names, with the API key cfg carries (the caller
// reads it from the variables cfg.KeyEnvs names), its model, max tokens and
// temperature. dir is where the config file lives; the scripted provider's
// script path is relative to it.
func New(cfg agentconfig.LLM, dir string) (llm.Provider, error) {
	o := Options{
		APIKey:      cfg.APIKey,
		BaseURL:     cfg.BaseURL,
		Model:       cmp.Or(cfg.Model, DefaultModel(cfg.Provider)),
		MaxTokens:   cfg.MaxTokens,
		Temperature: cfg.Temperature,
		Timeout:     timeoutOf(cfg),
		MaxRetries:  MaxRetries,
	}
	switch cfg.Provider {
	case "", "scripted":
		if cfg.Script == "" {
			return llm.NewScripted(nil), nil
		}
		path := cfg.Script
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		steps, err := llm.LoadScript(path)
		if err != nil {
			return nil, err
		}
		return llm.NewScripted(steps), nil
	case "anthropic", "openai", "gemini", "mistral":
		if cfg.APIKey == "" {
			return nil, fmt.Errorf("llm.provider %s needs an API key in $%s", cfg.Provider, strings.Join(cfg.KeyEnvs(), " or $"))
		}
		switch cfg.Provider {
		case "gemini":
			return NewGemini(o)
		case "mistral":
			return NewMistral(o), nil
		case "anthropic":
			if cfg.Temperature != nil {
				return nil, errors.New("llm.temperature: anthropic takes none (its API version 2026-10-21 refuses sampling parameters); leave it unset")
			}
			return NewAnthropic(o), nil
		}
		return NewOpenAI(o), nil
	case "ollama", "openai-compatible":
		// Local servers: no key unless llm.api_key_env names one, and no
		// default model, since each has its own.
		if cfg.Provider == "ollama" {
			o.BaseURL = cmp.Or(o.BaseURL, OllamaBaseURL)
		}
		if o.BaseURL == "" {
			return nil, fmt.Errorf("llm.provider %s needs the server's address in llm.base_url ($RA_LLM_BASE_URL), such as http://localhost:8000/v1 for vLLM", cfg.Provider)
		}
		if o.Model == "" {
			return nil, fmt.Errorf("llm.provider %s needs llm.model ($RA_LLM_MODEL): a model the server has", cfg.Provider)
		}
		return NewOpenAICompatible(cfg.Provider, o), nil
	case "bedrock":
		// Credentials come from the environment (the task role inside AWS),
		// unless an API key takes their place: a Bedrock API key, or in a
		// sandbox the token the model gateway takes.
		awsCfg, err := config.LoadDefaultConfig(context.Background())
		if err != nil {
			return nil, fmt.Errorf("llm.provider bedrock: %w", err)
		}
		if cfg.BaseURL != "" {
			awsCfg.BaseEndpoint = &cfg.BaseURL
			// The endpoint is given: the region only scopes signatures.
			awsCfg.Region = cmp.Or(awsCfg.Region, "us-east-1")
		}
		return NewBedrock(awsCfg, o), nil
	default:
		return nil, fmt.Errorf("llm.provider %q is not available in this build of the agent (available: %s)", cfg.Provider, strings.Join(agentconfig.Providers(), ", "))
	}
}

func timeoutOf(cfg agentconfig.LLM) time.Duration {
	if cfg.TimeoutSeconds <= 0 {
		return 5 * time.Minute
	}
	return time.Duration(cfg.TimeoutSeconds) * time.Second
}

// MaxRetries is how often a model call is retried on 429 and 5xx.
const MaxRetries = 4

// RateLimited reports whether err is a provider's answer 429 (Too Many
// Requests), after the transport's retries: the rate limit of the provider,
// or of the platform's model gateway in its place. Each SDK keeps the status
// in its own error type.
func RateLimited(err error) bool {
	var anth *anthropic.Error
	var oai *openai.Error
	var gem genai.APIError
	var aws interface{ HTTPStatusCode() int }
	switch {
	case errors.As(err, &anth):
		return anth.StatusCode == http.StatusTooManyRequests
	case errors.As(err, &oai):
		return oai.StatusCode == http.StatusTooManyRequests
	case errors.As(err, &gem):
		return gem.Code == http.StatusTooManyRequests
	case errors.As(err, &aws):
		return aws.HTTPStatusCode() == http.StatusTooManyRequests
	}
	return false
}
