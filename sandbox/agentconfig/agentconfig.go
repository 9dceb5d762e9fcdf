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
	// Provider is scripted, anthropic, openai or bedrock.
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// APIKeyEnv names the environment variable holding the API key (default
	// KeyEnv's).
	APIKeyEnv string `json:"api_key_env"`
	// APIKey is the key itself, read from that variable by whoever loads the
	// configuration (never from the file).
	APIKey    string `json:"-"`
	MaxTokens int    `json:"max_tokens"`
	// BaseURL points openai at any compatible endpoint (LiteLLM, vLLM…).
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

// KeyEnv is the variable holding the provider's API key: APIKeyEnv, else the
// provider's usual one; "" for providers without a key.
func (l LLM) KeyEnv() string {
	if l.APIKeyEnv != "" {
		return l.APIKeyEnv
	}
	return map[string]string{"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}[l.Provider]
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
	if c.LLM.MaxTokens < 1 || c.LLM.MaxTokens > 1_000_000 {
		return fmt.Errorf("llm.max_tokens %d: want 1..1000000", c.LLM.MaxTokens)
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
	switch name {
	case "scripted", "anthropic", "openai", "bedrock":
		return nil
	}
	return fmt.Errorf("%q: want scripted, anthropic, openai or bedrock", name)
}
