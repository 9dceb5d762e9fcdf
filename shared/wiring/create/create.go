// Package create builds the create function: POST /api/remote_agents/create.
package create

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sessionapi"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/poolservice"
)

// Build builds the create function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	svc, err := Creator(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	return wiring.Pick("create", (&sessionapi.Handlers{Creator: svc, Log: e.Log}).Routes(e.Config.AllowedOrigins))
}

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
