// Package workspace builds the workspace function: the workspace tools apps
// run in their agent's sandbox, through its inbox.
package workspace

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/workspaceapi"
)

// Build builds the workspace function.
func Build(_ context.Context, e *wiring.Env) (wiring.Function, error) {
	svc := session.NewWorkspaceTools(session.WorkspaceToolsOptions{Store: e.SessionStore(), ToolResults: e.ToolResults(), Notifier: e.Notifier(), Log: e.Log})
	return wiring.Pick("workspace", (&workspaceapi.Handlers{Sessions: svc, Log: e.Log}).Routes(e.Config.AllowedOrigins))
}
