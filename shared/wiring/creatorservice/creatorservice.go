// Package creatorservice builds the creator of agents over an Env: what the
// create function and the sandbox API's (e2b) share, without either's
// handlers.
package creatorservice

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/poolservice"
)

// Creator is the creator of agents (and of the sandbox API's sandboxes)
// over e.
func Creator(ctx context.Context, e *wiring.Env) (*session.Creator, error) {
	jobs, err := e.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	return session.NewCreator(session.CreatorOptions{
		Store:           e.SessionStore(),
		Quotas:          e.Quotas(),
		Registry:        e.Registry(),
		AgentTypes:      poolservice.AgentTypes(e),
		Guardrails:      e.Guardrails(),
		Jobs:            jobs,
		Reporter:        e.Reporter(),
		Log:             e.Log,
		CreationTimeout: e.Config.CreationTimeout,
		PublicBaseURL:   e.Config.PublicBaseURL,
		DefaultFeatures: e.Config.EmbedFeatures,
		// Create validates task_context's URL with them.
		GitInsecureHosts: e.Config.GitInsecureHosts,
		Checkpoints:      e.Checkpoints(),
	}), nil
}
