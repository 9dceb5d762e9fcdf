// Package agentconfig is the agent's configuration: its file (agent.json, Load):
// which model provider and model to use, the workspace, the web gateway,
// telemetry and the session store; and its environment (the RA_* variables a
// sandbox launcher sets, LoadEnv). Unknown keys and malformed values are errors,
// so a typo never passes silently.
package agentconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultPath is read when no --config is given, if it exists.
const DefaultPath = "agent.json"

// Config is agent.json.
type Config struct {
	Agent     Agent     `json:"agent"`
	LLM       LLM       `json:"llm"`
	Web       Web       `json:"web"`
	Telemetry Telemetry `json:"telemetry"`
	Session   Session   `json:"session"`
}

// Agent identifies the agent and its workspace.
type Agent struct {
	ID        string `json:"id"`
	Workspace string `json:"workspace"`
}

// LLM selects the model.
type LLM struct {
	// Provider is one of Providers: scripted, anthropic, openai, bedrock,
	// gemini, mistral, ollama or openai-compatible.
	Provider string `json:"provider"`
	// Model is a canonical model ID (claude-sonnet-4.5) or the provider's own;
	// "" is the provider's default model, and ollama and openai-compatible
	// have none.
	Model string `json:"model"`
	// APIKeyEnv names the environment variable holding the API key (default
	// KeyEnvs').
	APIKeyEnv string `json:"api_key_env"`
	// APIKey is the key itself, read from that variable by whoever loads the
	// configuration (never from the file).
	APIKey string `json:"-"`
	// MaxTokens bounds each reply (max_tokens, max_completion_tokens,
	// maxOutputTokens: the provider's name for it).
	MaxTokens int `json:"max_tokens"`
	// Temperature is sent with every request, 0..2; nil (absent) sends none,
	// leaving the model's default.
	Temperature *float64 `json:"temperature"`
	// BaseURL is the provider's endpoint: for openai any compatible one
	// (LiteLLM…), for ollama another host than localhost:11434, for
	// openai-compatible (vLLM, llama.cpp, LM Studio…) required. "" is the
	// provider's public API.
	BaseURL string `json:"base_url"`
	// Script is the JSONL script of the scripted provider, relative to the config.
	Script string `json:"script"`
	// TimeoutSeconds bounds one model call (default 300).
	TimeoutSeconds int `json:"timeout_seconds"`
}

// Web configures web_fetch and web_search.
type Web struct {
	GatewayURL      string `json:"gateway_url"`
	GatewayTokenEnv string `json:"gateway_token_env"`
}

// providers are the model providers this build of the agent has, in the order
// messages list them, each with the variables its API key is read from by
// default, first set first ("" for none: scripted; bedrock uses the AWS
// credentials; local servers take no key unless APIKeyEnv names one).
var providers = []struct {
	name    string
	keyEnvs []string
}{
	{"scripted", nil},
	{"anthropic", []string{"ANTHROPIC_API_KEY"}},
	{"openai", []string{"OPENAI_API_KEY"}},
	{"bedrock", nil},
	{"gemini", []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}},
	{"mistral", []string{"MISTRAL_API_KEY"}},
	{"ollama", nil},
	{"openai-compatible", nil},
}

// Providers names the model providers this build of the agent has.
func Providers() []string {
	names := make([]string, len(providers))
	for i, p := range providers {
		names[i] = p.name
	}
	return names
}

// KeyEnvs are the variables the provider's API key is read from, the first set
// one winning: APIKeyEnv alone, else the provider's usual ones (GEMINI_API_KEY
// then GOOGLE_API_KEY for gemini); none for providers without a key.
func (l LLM) KeyEnvs() []string {
	if l.APIKeyEnv != "" {
		return []string{l.APIKeyEnv}
	}
	for _, p := range providers {
		if p.name == l.Provider {
			return p.keyEnvs
		}
	}
	return nil
}

// KeyEnv is the first of KeyEnvs, the one messages name; "" for providers
// without a key.
func (l LLM) KeyEnv() string {
	if envs := l.KeyEnvs(); len(envs) > 0 {
		return envs[0]
	}
	return ""
}

// Telemetry configures the exporter.
type Telemetry struct {
	Enabled  bool   `json:"enabled"`
	Endpoint string `json:"endpoint"`
	// Protocol is http, otlp, file or noop.
	Protocol string `json:"protocol"`
}

// Session configures where runs are persisted.
type Session struct {
	// Store is file or sqlite.
	Store string `json:"store"`
	Path  string `json:"path"`
}

// Defaults: the scripted provider, 4096 max tokens, telemetry off, file sessions.
func Defaults() Config {
	return Config{
		Agent:     Agent{ID: "agent", Workspace: "."},
		LLM:       LLM{Provider: "scripted", MaxTokens: 4096, TimeoutSeconds: 300},
		Telemetry: Telemetry{Protocol: "noop"},
		Session:   Session{Store: "file", Path: ".agent/sessions"},
	}
}

// Load reads path over the defaults. An empty path reads DefaultPath if present.
// Relative paths inside the file (script, workspace, session path) stay as
// written; Dir says where they are relative to.
func Load(path string) (Config, string, error) {
	c := Defaults()
	explicit := path != ""
	if !explicit {
		path = DefaultPath
	}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && !explicit:
		return c, ".", nil
	case err != nil:
		return c, "", fmt.Errorf("config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, "", fmt.Errorf("config %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return c, "", fmt.Errorf("config %s: %w", path, err)
	}
	return c, filepath.Dir(path), nil
}

// Validate checks the values.
func (c Config) Validate() error {
	if err := checkProvider(c.LLM.Provider); err != nil {
		return fmt.Errorf("llm.provider %w", err)
	}
	if c.LLM.MaxTokens < 1 || c.LLM.MaxTokens > maxMaxTokens {
		return fmt.Errorf("llm.max_tokens %d: want 1..%d", c.LLM.MaxTokens, maxMaxTokens)
	}
	if err := checkTemperature(c.LLM.Temperature); err != nil {
		return fmt.Errorf("llm.temperature %w", err)
	}
	if c.LLM.TimeoutSeconds < 1 || c.LLM.TimeoutSeconds > 3600 {
		return fmt.Errorf("llm.timeout_seconds %d: want 1..3600", c.LLM.TimeoutSeconds)
	}
	switch c.Telemetry.Protocol {
	case "http", "otlp", "file", "noop":
	default:
		return fmt.Errorf("telemetry.protocol %q: want http, otlp, file or noop", c.Telemetry.Protocol)
	}
	switch c.Session.Store {
	case "file", "sqlite":
	default:
		return fmt.Errorf("session.store %q: want file or sqlite", c.Session.Store)
	}
	return nil
}

// checkProvider accepts the providers this build of the agent has.
func checkProvider(name string) error {
	names := Providers()
	if slices.Contains(names, name) {
		return nil
	}
	return fmt.Errorf("%q: want one of %s", name, strings.Join(names, ", "))
}

// maxMaxTokens bounds llm.max_tokens.
const maxMaxTokens = 1_000_000

// MaxTemperature is the highest temperature accepted; providers whose range is
// narrower (Anthropic's is 0..1) answer a higher one with their own error.
const MaxTemperature = 2

// checkTemperature accepts nil (the model's default) and 0..MaxTemperature.
func checkTemperature(t *float64) error {
	if t != nil && !(*t >= 0 && *t <= MaxTemperature) {
		return fmt.Errorf("%v: want 0..%d", *t, MaxTemperature)
	}
	return nil
}
