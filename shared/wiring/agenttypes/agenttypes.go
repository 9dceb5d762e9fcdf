// Package agenttypes builds the agenttypes function: the agent type routes,
// app key authenticated.
package agenttypes

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/agenttypeapi"
	"github.com/remote-agents/remote-agents/shared/appkey"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/poolservice"
)

// Build builds the agenttypes function.
func Build(_ context.Context, e *wiring.Env) (wiring.Function, error) {
	h := &agenttypeapi.Handlers{Auth: appkey.New(e.Registry()), Types: poolservice.AgentTypes(e), Log: e.Log}
	return wiring.Pick("agenttypes", h.Routes())
}
