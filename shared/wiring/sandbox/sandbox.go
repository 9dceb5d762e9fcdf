// Package sandbox builds the sandbox function: the sandbox channel, its
// push channel's WebSocket routes and the warm pool's sandboxes' routes.
package sandbox

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/sandboxapi"
	"github.com/remote-agents/remote-agents/shared/sandboxchannel"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/jobservice"
	"github.com/remote-agents/remote-agents/shared/wiring/poolservice"
)

// Build builds the sandbox function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	jobs, err := jobservice.Runs(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	jobQueue, err := e.Jobs(ctx)
	if err != nil {
		return wiring.Function{}, err
	}
	ch := sandboxchannel.New(sandboxchannel.Options{
		Checkpoints:        e.Checkpoints(),
		CheckpointInterval: e.Config.CheckpointInterval,
		Jobs:               jobQueue,
		Limits:             e.Limits(),
		JobRuns:            jobs,
		Store:              e.SessionStore(),
		Registry:           e.Registry(),
		Guardrails:         e.Guardrails(),
		Reporter:           e.Reporter(),
		Blob:               e.Bucket(),
		Secrets:            e.Bucket(),
		Log:                e.Log,
		// The spec passes them on: the sandbox checks its clone URL too.
		GitInsecureHosts: e.Config.GitInsecureHosts,
		ToolResults:      e.ToolResults(),
		Uploads:          e.Quotas().Uploads,
	})
	h := &sandboxapi.Handlers{Channel: ch, Pool: poolservice.Pool(e), Viewers: e.Viewers(), Log: e.Log}
	f, err := wiring.Pick("sandbox", h.Routes())
	f.Socket = h.Socket
	return f, err
}
