// Package agenttypes builds the agenttypes function: the agent type routes,
// the secrets routes and the webhook routes, app key authenticated.
package agenttypes

import (
	"context"
	"slices"

	"github.com/remote-agents/remote-agents/shared/agenttypeapi"
	"github.com/remote-agents/remote-agents/shared/appkey"
	"github.com/remote-agents/remote-agents/shared/secretsapi"
	"github.com/remote-agents/remote-agents/shared/webhookapi"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/poolservice"
	"github.com/remote-agents/remote-agents/shared/wiring/secretstore"
	"github.com/remote-agents/remote-agents/shared/wiring/webhookservice"
)

// Build builds the agenttypes function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	auth := appkey.New(e.Registry())
	h := &agenttypeapi.Handlers{Auth: auth, Types: poolservice.AgentTypes(e), Log: e.Log}
	sh := &secretsapi.Handlers{Auth: auth, Secrets: secretstore.Service(e), Log: e.Log}
	hooks, err := webhookservice.Service(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	wh := &webhookapi.Handlers{Auth: auth, Webhooks: hooks, Log: e.Log}
	return wiring.Pick("agenttypes", slices.Concat(h.Routes(), sh.Routes(), wh.Routes()))
}
