// Package jobs builds the jobs function: the orchestrator's /internal/
// routes, for its role only (RA_ORCHESTRATOR_ROLE_ARN).
package jobs

import (
	"context"
	"errors"

	"github.com/remote-agents/remote-agents/shared/orchestratorapi"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/jobservice"
)

// Build builds the jobs function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	svc, err := jobservice.Service(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	if e.Config.OrchestratorRoleARN == "" {
		return wiring.Function{}, errors.New("jobs needs the orchestrator's role (RA_ORCHESTRATOR_ROLE_ARN)")
	}
	return wiring.Pick("jobs", (&orchestratorapi.Handlers{Jobs: svc, Caller: e.Config.OrchestratorRoleARN, Log: e.Log}).Routes())
}
