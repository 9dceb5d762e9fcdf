// Package embed builds the embed function: the embed view's page.
package embed

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/embedview"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// Build builds the embed function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	h := &embedview.Handlers{
		Sessions:       session.Access{Store: e.SessionStore()},
		AllowedOrigins: e.Config.AllowedOrigins,
		UploadOrigin:   e.BucketOrigin(ctx),
		Log:            e.Log,
	}
	return wiring.Pick("embed", h.Routes())
}
