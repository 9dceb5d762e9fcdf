// Package shutdown builds the shutdown function: POST
// /api/remote_agents/{id}/shutdown.
package shutdown

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sessionapi"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// Build builds the shutdown function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	jobs, err := e.Jobs(ctx)
	if err != nil {
		return wiring.Function{}, err
	}
	svc := session.NewControl(session.ControlOptions{Store: e.SessionStore(), Guardrails: e.Guardrails(), Jobs: jobs, Limits: e.Limits(), Notifier: e.Notifier(), Log: e.Log})
	return wiring.Pick("shutdown", (&sessionapi.Handlers{Control: svc, Log: e.Log}).Routes(e.Config.AllowedOrigins))
}
