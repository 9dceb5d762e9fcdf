// Package e2b builds the e2b function: the sandbox API, E2B's control plane
// under /e2b (package e2bapi).
package e2b

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/e2bapi"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/creatorservice"
	"github.com/remote-agents/remote-agents/shared/wiring/e2bservice"
	"github.com/remote-agents/remote-agents/shared/wiring/fleetservice"
)

// Build builds the e2b function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	creator, err := creatorservice.Creator(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	fl, err := fleetservice.Service(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	jobs, err := e.Jobs(ctx)
	if err != nil {
		return wiring.Function{}, err
	}
	tokens, err := e2bservice.Tokens(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	svc := e2bapi.New(e2bapi.Options{Store: e.SessionStore(), Creator: creator, Fleet: fl, Jobs: jobs, Tokens: tokens, Domain: e.Config.E2B.Domain, Log: e.Log})
	return wiring.Pick("e2b", e2bapi.NewHandlers(svc, e.Log).Routes())
}
