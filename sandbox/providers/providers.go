// Package providers builds the configured model provider.
package providers

import (
	"fmt"
	"path/filepath"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/llm"
)

// New returns the provider cfg names. dir is where the config file lives; the
// scripted provider's script path is relative to it.
func New(cfg agentconfig.LLM, dir string) (llm.Provider, error) {
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
	default:
		return nil, fmt.Errorf("llm.provider %q is not available in this build of the agent (available: scripted)", cfg.Provider)
	}
}
