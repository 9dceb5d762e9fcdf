// Package models holds a deployment's model settings: the providers whose API
// keys the platform keeps in Secrets Manager (one secret per provider per
// environment, read by the model function alone), and the sandboxes' default
// model with the Bedrock models the model function may invoke, read from CDK
// context. It imports no CDK, so the stack and the commands that report on a
// deployment name the secrets alike.
package models

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// KeyProviders are the providers whose API key the model function reads from
// Secrets Manager. Bedrock has none: the model function's role calls it.
var KeyProviders = []string{"anthropic", "openai", "gemini", "mistral"}

// SecretName is the name of provider's secret in env: ra-<env>-model-<provider>.
func SecretName(env, provider string) string { return "ra-" + env + "-model-" + provider }

// SecretVariable is the model function's variable naming provider's secret:
// RA_MODEL_SECRET_<PROVIDER>.
func SecretVariable(provider string) string {
	return "RA_MODEL_SECRET_" + strings.ToUpper(provider)
}

// SandboxProviders are the providers a deployed sandbox may default to: the
// hosted ones, whose calls go through the model route, and the scripted one,
// which calls nothing (smoke tests).
var SandboxProviders = []string{"anthropic", "openai", "gemini", "mistral", "bedrock", "scripted"}

// Context keys. Each may be given for one environment as <key>.<env>, which
// wins over <key>.
const (
	// ProviderKey is the sandboxes' RA_LLM_PROVIDER.
	ProviderKey = "llmProvider"
	// ModelKey is the sandboxes' RA_LLM_MODEL (empty: the provider's default).
	ModelKey = "llmModel"
	// BedrockKey is a comma list of the Bedrock model IDs, inference profile
	// IDs or ARNs the model function may invoke.
	BedrockKey = "bedrockModels"
)

// The stack's outputs of the settings, which `make providers` reports.
const (
	OutputProvider = "SandboxLlmProvider"
	OutputModel    = "SandboxLlmModel"
	OutputBedrock  = "BedrockModels"
)

// Settings are one environment's model settings.
type Settings struct {
	// Provider and Model are the sandboxes' RA_LLM_PROVIDER and RA_LLM_MODEL.
	Provider string
	Model    string
	// Bedrock lists what the model function may invoke on Bedrock.
	Bedrock []string
}

// FromContext reads env's settings through ctx, which returns a context
// value or "": <key>.<env> first, then <key>.
func FromContext(env string, ctx func(key string) string) (Settings, error) {
	get := func(key string) string {
		if v := strings.TrimSpace(ctx(key + "." + env)); v != "" {
			return v
		}
		return strings.TrimSpace(ctx(key))
	}
	s := Settings{Provider: get(ProviderKey), Model: get(ModelKey)}
	for _, id := range strings.Split(get(BedrockKey), ",") {
		if id = strings.TrimSpace(id); id != "" {
			s.Bedrock = append(s.Bedrock, id)
		}
	}
	return s, s.Validate()
}

// Validate reports settings a deployed sandbox could not use.
func (s Settings) Validate() error {
	switch {
	case s.Provider == "":
		return fmt.Errorf("context %s: sandboxes need a model provider (one of %s)", ProviderKey, strings.Join(SandboxProviders, ", "))
	case !slices.Contains(SandboxProviders, s.Provider):
		return fmt.Errorf("context %s: %q is not a provider a deployed sandbox can use (one of %s)", ProviderKey, s.Provider, strings.Join(SandboxProviders, ", "))
	case s.Provider == "bedrock" && len(s.Bedrock) == 0:
		return fmt.Errorf("context %s: %s is bedrock, so the model function needs the Bedrock models it may invoke", BedrockKey, ProviderKey)
	case strings.ContainsAny(s.Model, " \t\n,"):
		return fmt.Errorf("context %s: %q is not a model ID", ModelKey, s.Model)
	}
	for _, id := range s.Bedrock {
		if _, err := ParseBedrock(id); err != nil {
			return fmt.Errorf("context %s: %w", BedrockKey, err)
		}
	}
	return nil
}

// Bedrock is one entry of the Bedrock models: a foundation model, a
// system-defined cross-Region inference profile (ID with a geography prefix),
// or an ARN taken as it is.
type Bedrock struct {
	// ID is the model or profile ID; empty for an ARN.
	ID string
	// Geo is a profile's geography ("us", "eu", "global"…); empty for a model.
	Geo string
	// Model is the foundation model a profile routes to, or the model itself.
	Model string
	// ARN is an ARN given as it is.
	ARN string
}

// Profile reports whether b is a cross-Region inference profile.
func (b Bedrock) Profile() bool { return b.Geo != "" }

// Global reports whether b is a global inference profile, which may route to
// any commercial Region.
func (b Bedrock) Global() bool { return b.Geo == "global" }

// geographies prefix the IDs of system-defined inference profiles.
var geographies = []string{"us", "us-gov", "eu", "apac", "jp", "au", "ca", "global"}

var (
	modelID    = regexp.MustCompile(`^[a-z0-9-]+\.[A-Za-z][A-Za-z0-9._:-]*$`)
	bedrockARN = regexp.MustCompile(`^arn:aws[a-z-]*:bedrock:[a-z0-9-]*:[0-9]*:[a-z-]+/[A-Za-z0-9._:/-]+$`)
)

// ParseBedrock reads one entry of the Bedrock models.
func ParseBedrock(id string) (Bedrock, error) {
	if strings.HasPrefix(id, "arn:") {
		if !bedrockARN.MatchString(id) {
			return Bedrock{}, fmt.Errorf("%q is not a Bedrock ARN", id)
		}
		return Bedrock{ARN: id}, nil
	}
	if !modelID.MatchString(id) {
		return Bedrock{}, fmt.Errorf("%q is not a Bedrock model or inference profile ID (such as anthropic.claude-haiku-4-5-20251001-v1:0 or us.anthropic.claude-sonnet-4-5-20250929-v1:0)", id)
	}
	geo, rest, _ := strings.Cut(id, ".")
	if !slices.Contains(geographies, geo) {
		return Bedrock{ID: id, Model: id}, nil
	}
	if !modelID.MatchString(rest) {
		return Bedrock{}, errors.New("inference profile " + id + " names no model after its geography")
	}
	return Bedrock{ID: id, Geo: geo, Model: rest}, nil
}
