// Package messages builds the messages function: what users send an agent
// (messages, attachments, env values).
package messages

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sessionapi"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// Build builds the messages function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	jobs, err := e.Jobs(ctx)
	if err != nil {
		return wiring.Function{}, err
	}
	svc := session.NewInbox(session.InboxOptions{Store: e.SessionStore(), Blob: e.Bucket(), Secrets: e.Bucket(), Notifier: e.Notifier(), Uploads: e.Quotas().Uploads,
		Jobs: jobs, Log: e.Log})
	return wiring.Pick("messages", (&sessionapi.Handlers{Inbox: svc, Log: e.Log}).Routes(e.Config.AllowedOrigins))
}
