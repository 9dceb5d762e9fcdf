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

// modelSecret sets where provider's API key is kept (RA_MODEL_SECRET_<PROVIDER>).
func modelSecret(provider string) func(*Platform, string) error {
	return func(p *Platform, v string) error {
		p.Model.Secrets[provider] = v
		return nil
	}
}

// modelUpstream sets where provider's calls go (the variable name).
func modelUpstream(provider, name string) func(*Platform, string) error {
	return func(p *Platform, v string) error {
		p.Model.Upstreams[provider] = strings.TrimRight(v, "/")
		return checkBaseURL(name, v)
	}
}

// modelProvider accepts the providers the gateway serves.
func modelProvider(name, provider string) error {
	if !slices.Contains(sandboxwire.ModelProviders, provider) {
		return fmt.Errorf("%s: unknown model provider %q (want %s)", name, provider, strings.Join(sandboxwire.ModelProviders, ", "))
	}
	return nil
}
