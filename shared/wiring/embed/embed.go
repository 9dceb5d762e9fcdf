// Package embed builds the embed function: the embed view's page.
package embed

import (
	"context"
	"net/url"
	"time"

	"github.com/remote-agents/remote-agents/shared/embedview"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// Build builds the embed function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	h := &embedview.Handlers{
		Sessions:       session.Access{Store: e.SessionStore()},
		AllowedOrigins: e.Config.AllowedOrigins,
		UploadOrigin:   uploadOrigin(ctx, e),
		Log:            e.Log,
	}
	return wiring.Pick("embed", h.Routes())
}

// uploadOrigin is the origin presigned upload URLs point at, which the embed
// view's Content-Security-Policy lets the page PUT attachments to.
func uploadOrigin(ctx context.Context, e *wiring.Env) string {
	u, err := e.Bucket().PresignPut(ctx, "origin-probe", "", 0, time.Minute)
	if err != nil {
		return ""
	}
	parsed, err := url.Parse(u.URL)
	if err != nil {
		return ""
	}
	return parsed.Scheme + "://" + parsed.Host
}
