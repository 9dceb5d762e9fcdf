// Package alive builds the alive function: GET
// /api/remote_agents/{id}/alive.
package alive

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sessionapi"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// Build builds the alive function. It reports the current guardrails' hash,
// and stops what is left of a sandbox it finds lost.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	jobs, err := e.Jobs(ctx)
	if err != nil {
		return wiring.Function{}, err
	}
	svc := session.NewControl(session.ControlOptions{Store: e.SessionStore(), Guardrails: e.Guardrails(), Jobs: jobs, Limits: e.Limits(), Log: e.Log})
	return wiring.Pick("alive", (&sessionapi.Handlers{Control: svc, Log: e.Log}).Routes(e.Config.AllowedOrigins))
}
