// Package fleet builds the fleet function: GET /api/remote_agents (an app's
// agents), POST /api/remote_agents/{id}/kill and GET /api/v1/usage.
package fleet

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/fleetapi"
	"github.com/remote-agents/remote-agents/shared/usage"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/fleetservice"
)

// Build builds the fleet function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	svc, err := fleetservice.Service(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	l := e.Config.SessionLimits
	u := usage.New(usage.Options{Store: e.SessionStore(), Keys: e.Registry(), Platform: e.Limits(), LiveQuota: e.Config.Quotas.ConcurrentSessions,
		DayCapUSD: l.MaxCostUSDPerDay, MonthCapUSD: l.MaxCostUSDPerMonth})
	return wiring.Pick("fleet", fleetapi.New(svc, u, e.Log).Routes(e.Config.AllowedOrigins))
}
