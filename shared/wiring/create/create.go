// Package create builds the create function: POST /api/remote_agents/create.
package create

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/sessionapi"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/creatorservice"
)

// Build builds the create function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	svc, err := creatorservice.Creator(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	return wiring.Pick("create", (&sessionapi.Handlers{Creator: svc, Log: e.Log}).Routes(e.Config.AllowedOrigins))
}
