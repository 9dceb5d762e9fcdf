package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Model configures the model gateway: which providers sandboxes may call
// through it and with which models, where each provider's API is, and where
// its API key is kept.
type Model struct {
	// GatewayURL is where sandboxes reach the model route
	// (RA_MODEL_GATEWAY_URL, default GatewayURL: on AWS the route streams from
	// a function URL of its own); launchers pass it on to each sandbox.
	GatewayURL string
	// Providers are the providers the gateway serves (RA_MODEL_PROVIDERS,
	// comma-separated; default every one of sandboxwire.ModelProviders).
	Providers []string
	// Allowed limits, by provider, the models a call may name (RA_MODEL_ALLOWED,
	// comma-separated provider:model pairs, the model as the provider's API
	// names it); a provider it does not name takes any model.
	Allowed map[string][]string
	// Secrets name, by provider, the Secrets Manager secret (id or ARN) whose
	// value is the provider's API key (RA_MODEL_SECRET_<PROVIDER>). A provider
	// without one takes its key from the process's environment, under its
	// usual variable (the dev server); Bedrock takes none: the process's AWS
	// credentials sign its calls.
	Secrets map[string]string
	// Upstreams are, by provider, the base URL its calls go to
	// (RA_MODEL_UPSTREAM_<PROVIDER>; default the provider's public API).
	Upstreams map[string]string
}

// modelVars are the per-provider variables, by provider ("" where a provider
// has none).
var modelVars = []struct{ provider, secret, upstream string }{
	{sandboxwire.ModelAnthropic, "RA_MODEL_SECRET_ANTHROPIC", "RA_MODEL_UPSTREAM_ANTHROPIC"},
	{sandboxwire.ModelOpenAI, "RA_MODEL_SECRET_OPENAI", "RA_MODEL_UPSTREAM_OPENAI"},
	{sandboxwire.ModelGemini, "RA_MODEL_SECRET_GEMINI", "RA_MODEL_UPSTREAM_GEMINI"},
	{sandboxwire.ModelMistral, "RA_MODEL_SECRET_MISTRAL", "RA_MODEL_UPSTREAM_MISTRAL"},
	{sandboxwire.ModelBedrock, "", "RA_MODEL_UPSTREAM_BEDROCK"},
}

// modelEnvVars are the model gateway's rows of the table of variables.
func modelEnvVars() []envVar {
	vars := []envVar{
		{"RA_MODEL_GATEWAY_URL", false, func(p *Platform, v string) error {
			p.Model.GatewayURL = strings.TrimRight(v, "/")
			return checkBaseURL("RA_MODEL_GATEWAY_URL", v)
		}},
		{"RA_MODEL_PROVIDERS", true, func(p *Platform, v string) error {
			p.Model.Providers = splitList(v)
			for _, name := range p.Model.Providers {
				if err := modelProvider("RA_MODEL_PROVIDERS", name); err != nil {
					return err
				}
			}
			return nil
		}},
		{"RA_MODEL_ALLOWED", false, func(p *Platform, v string) error {
			p.Model.Allowed = map[string][]string{}
			for _, pair := range splitList(v) {
				provider, model, ok := strings.Cut(pair, ":")
				if !ok || model == "" {
					return fmt.Errorf("RA_MODEL_ALLOWED: %q is not provider:model", pair)
				}
				if err := modelProvider("RA_MODEL_ALLOWED", provider); err != nil {
					return err
				}
				p.Model.Allowed[provider] = append(p.Model.Allowed[provider], model)
			}
			return nil
		}},
	}
	for _, mv := range modelVars {
		provider := mv.provider
		if mv.secret != "" {
			vars = append(vars, envVar{mv.secret, false, func(p *Platform, v string) error {
				p.Model.Secrets[provider] = v
				return nil
			}})
		}
		name := mv.upstream
		vars = append(vars, envVar{name, false, func(p *Platform, v string) error {
			p.Model.Upstreams[provider] = strings.TrimRight(v, "/")
			return checkBaseURL(name, v)
		}})
	}
	return vars
}

// modelProvider accepts the providers the gateway serves.
func modelProvider(name, provider string) error {
	if !slices.Contains(sandboxwire.ModelProviders, provider) {
		return fmt.Errorf("%s: unknown model provider %q (want %s)", name, provider, strings.Join(sandboxwire.ModelProviders, ", "))
	}
	return nil
}
