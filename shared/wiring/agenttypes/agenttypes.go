// Package agenttypes builds the agenttypes function: the agent type routes
// and the secrets routes, app key authenticated.
package agenttypes

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/agenttypeapi"
	"github.com/remote-agents/remote-agents/shared/appkey"
	"github.com/remote-agents/remote-agents/shared/secretsapi"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/poolservice"
	"github.com/remote-agents/remote-agents/shared/wiring/secretstore"
)

// Build builds the agenttypes function.
func Build(_ context.Context, e *wiring.Env) (wiring.Function, error) {
	auth := appkey.New(e.Registry())
	h := &agenttypeapi.Handlers{Auth: auth, Types: poolservice.AgentTypes(e), Log: e.Log}
	sh := &secretsapi.Handlers{Auth: auth, Secrets: secretstore.Service(e), Log: e.Log}
	return wiring.Pick("agenttypes", append(h.Routes(), sh.Routes()...))
}
