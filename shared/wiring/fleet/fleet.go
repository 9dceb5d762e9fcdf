// Package fleet builds the fleet function: GET /api/remote_agents (an app's
// agents), POST /api/remote_agents/{id}/kill and GET /api/v1/usage.
package fleet

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/fleet"
	"github.com/remote-agents/remote-agents/shared/fleetapi"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/usage"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// Build builds the fleet function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	svc, err := Service(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	l := e.Config.SessionLimits
	u := usage.New(usage.Options{Store: e.SessionStore(), Keys: e.Registry(), Platform: e.Limits(), LiveQuota: e.Config.Quotas.ConcurrentSessions,
		DayCapUSD: l.MaxCostUSDPerDay, MonthCapUSD: l.MaxCostUSDPerMonth})
	return wiring.Pick("fleet", fleetapi.New(svc, u, e.Log).Routes(e.Config.AllowedOrigins))
}

// Service is the fleet service over e: kills, pauses and resumes of an
// app's agents (the sandbox API's too).
func Service(ctx context.Context, e *wiring.Env) (*fleet.Service, error) {
	jobs, err := e.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	return fleet.New(fleet.Options{
		// A kill's stop is pushed to the sandbox at once.
		Store:       session.Pushing(e.SessionStore(), e.Notifier(), e.Log),
		Keys:        e.Registry(),
		Jobs:        jobs,
		Limits:      e.Limits(),
		Checkpoints: e.Checkpoints(),
		Wait:        e.Config.CreationTimeout,
		Log:         e.Log,
	}), nil
}
