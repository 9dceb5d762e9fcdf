package devserver

import (
	"cmp"
	"slices"

	"github.com/remote-agents/remote-agents/shared/modelgateway"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// DefaultProvider is the model sandboxes get when RA_LLM_PROVIDER is unset: a
// sandbox falls back to none by itself, so the dev server says which.
const DefaultProvider = "scripted"

// Model is how the dev server's sandboxes get their model, from the
// developer's environment. A hosted provider's calls go through the dev
// server's model gateway, which holds the key: sandboxes get the model
// settings, never a key, and the provider's address (RA_LLM_BASE_URL) is the
// gateway's upstream. A local server (ollama, openai-compatible) the sandbox
// calls itself, with the key RA_LLM_API_KEY_ENV names, if any.
type Model struct {
	// Provider is RA_LLM_PROVIDER, else DefaultProvider.
	Provider string
	// SandboxEnv is what sandboxes get (Options.SandboxEnv).
	SandboxEnv []string
	// Keys reads the hosted providers' keys for the gateway
	// (Options.ModelKeys): where RA_LLM_API_KEY_ENV names a variable, the
	// provider's key is read from it.
	Keys func(name string) (string, bool)
	// Upstream is where the gateway sends the provider's calls
	// (RA_LLM_BASE_URL), if not to the provider's API.
	Upstream string
}

// ModelFromEnv reads the model settings through lookup (os.LookupEnv).
func ModelFromEnv(lookup func(string) (string, bool)) Model {
	get := func(k string) string { v, _ := lookup(k); return v }
	m := Model{Provider: cmp.Or(get("RA_LLM_PROVIDER"), DefaultProvider), Keys: lookup}
	m.SandboxEnv = []string{"RA_LLM_PROVIDER=" + m.Provider}
	pass := []string{"RA_LLM_MODEL", "RA_LLM_SCRIPT", "RA_TOKEN_LIMIT", "RA_LLM_MAX_TOKENS", "RA_LLM_TEMPERATURE"}
	named := get("RA_LLM_API_KEY_ENV")
	if sandboxwire.ViaGateway(m.Provider) {
		m.Upstream = get("RA_LLM_BASE_URL")
		if p, ok := modelgateway.ProviderNamed(m.Provider); ok && named != "" {
			m.Keys = func(name string) (string, bool) {
				if slices.Contains(p.KeyEnvs, name) {
					return lookup(named)
				}
				return lookup(name)
			}
		}
	} else {
		pass = append(pass, "RA_LLM_BASE_URL", "RA_LLM_API_KEY_ENV")
		if named != "" && !slices.Contains(modelgateway.KeyVariables(), named) {
			pass = append(pass, named)
		}
	}
	for _, k := range pass {
		if v, ok := lookup(k); ok {
			m.SandboxEnv = append(m.SandboxEnv, k+"="+v)
		}
	}
	return m
}

// DefaultToolUser is who a root dev server's sandboxes run their tools'
// commands as when RA_TOOL_USER is not set: as on Fargate, not the agent's
// user, so that bash reads neither the agent's memory nor its environment.
const DefaultToolUser = "nobody"

// ToolUser is the RA_TOOL_USER sandboxes get ("" for none: the agent's own
// user) and what to tell the user about it: RA_TOOL_USER as set (empty
// included), else DefaultToolUser when the dev server runs as root (euid
// 0) and that user exists (exists), else none, since only root can run a
// command as another user.
func ToolUser(lookup func(string) (string, bool), euid int, exists func(name string) bool) (user, why string) {
	if v, ok := lookup("RA_TOOL_USER"); ok {
		if v == "" {
			return "", "the agent's own user (RA_TOOL_USER is empty)"
		}
		return v, v + " (RA_TOOL_USER)"
	}
	if euid == 0 && exists(DefaultToolUser) {
		return DefaultToolUser, DefaultToolUser + " (RA_TOOL_USER's default when the dev server runs as root)"
	}
	return "", "your user, as the agent (only root can run them as another user; RA_TOOL_USER)"
}
