// Package providers builds the configured model provider.
package providers

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"

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
		Model:       cfg.Model,
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
	case "anthropic", "openai", "gemini":
		if cfg.APIKey == "" {
			return nil, fmt.Errorf("llm.provider %s needs an API key in $%s", cfg.Provider, strings.Join(cfg.KeyEnvs(), " or $"))
		}
		switch cfg.Provider {
		case "gemini":
			return NewGemini(o)
		case "anthropic":
			if cfg.Temperature != nil {
				return nil, errors.New("llm.temperature: anthropic takes none (its API version 2026-10-21 refuses sampling parameters); leave it unset")
			}
			return NewAnthropic(o), nil
		}
		return NewOpenAI(o), nil
	case "bedrock":
		// Credentials come from the environment: the task role inside AWS.
		awsCfg, err := config.LoadDefaultConfig(context.Background())
		if err != nil {
			return nil, fmt.Errorf("llm.provider bedrock: %w", err)
		}
		if cfg.BaseURL != "" {
			awsCfg.BaseEndpoint = &cfg.BaseURL
		}
		return NewBedrock(awsCfg, o), nil
	default:
		return nil, fmt.Errorf("llm.provider %q is not available in this build of the agent (available: scripted, anthropic, openai, bedrock)", cfg.Provider)
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
