// Package jobworker builds jobworker: the function that handles the jobs
// queue (sandbox launches and stops, task state) and the tools queue (long
// gateway tool calls).
package jobworker

import (
	"context"
	"errors"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	worker "github.com/remote-agents/remote-agents/shared/queueworker"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/jobservice"
	"github.com/remote-agents/remote-agents/shared/wiring/poolservice"
	"github.com/remote-agents/remote-agents/shared/wiring/toolservice"
)

// Build builds jobworker. Sandboxes start with the Env's Launcher
// (wiring.WithLauncher on Lambda); it fails without one.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	if e.Launcher == nil {
		return wiring.Function{}, errors.New("jobworker needs a launcher")
	}
	gate, err := toolservice.New(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	set := e.Resources
	jobsDLQ, err := e.Queue(ctx, set.JobsQueue.DeadLetterName, e.Config.Queues.JobsDLQ)
	if err != nil {
		return wiring.Function{}, err
	}
	toolsDLQ, err := e.Queue(ctx, set.ToolsQueue.DeadLetterName, e.Config.Queues.ToolsDLQ)
	if err != nil {
		return wiring.Function{}, err
	}
	sweeper := session.NewSweeper(session.SweeperOptions{Store: e.SessionStore(), Tenants: e.Registry().Tenants, Log: e.Log})
	jobService, err := jobservice.Runs(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	jobs, err := e.Jobs(ctx)
	if err != nil {
		return wiring.Function{}, err
	}
	// Its pauses (a sandbox at its end) are pushed to the sandbox.
	w := &worker.Worker{Jobs: jobService, Store: session.Pushing(e.SessionStore(), e.Notifier(), e.Log), Expiries: jobs, Launcher: e.Launcher, DLQ: jobsDLQ, GatewayURL: e.Config.GatewayURL, ModelGatewayURL: e.Config.Model.GatewayURL, PushURL: e.Config.Push.URL, Tools: gate, ToolsDLQ: toolsDLQ, Sweeper: sweeper, Pool: poolservice.Pool(e), Log: e.Log,
		Addresses: dynamo.NewAddresses(e.DynamoDB(), e.Resources.Idempotency.Name), Checkpoints: e.Checkpoints()}
	return wiring.Function{Name: routes.JobWorker, Worker: w.Handle}, nil
}
