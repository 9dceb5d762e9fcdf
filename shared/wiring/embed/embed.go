// Package embed builds the embed function: the embed view's page.
package embed

import (
	"context"
	"strings"

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
		LiveURL:        liveURL(e),
		Log:            e.Log,
	}
	return wiring.Pick("embed", h.Routes())
}

// liveURL is where the page's viewers connect: the push channel
// (RA_PUSH_URL), as a path when it is on the page's own origin (the dev
// server's, reached by whatever name the browser uses); "" when there is
// none (the page reads the event stream).
func liveURL(e *wiring.Env) string {
	u := e.Config.Push.URL
	if u == "" {
		return ""
	}
	if own := "ws" + strings.TrimPrefix(e.Config.PublicBaseURL, "http"); e.Config.PublicBaseURL != "" && strings.HasPrefix(u, own+"/") {
		return strings.TrimPrefix(u, own)
	}
	return u
}
