// Package toolservice builds the gateway tools' service (package toolgate)
// for an Env, as the toolcallback function and jobworker (the tools queue)
// use it.
package toolservice

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/toolgate"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// New returns the gateway tools' service over the Env's stores, queueing
// long calls on the tools queue (RA_TOOLS_QUEUE_URL, else looked up by name).
func New(ctx context.Context, e *wiring.Env) (*toolgate.Service, error) {
	q, err := e.ToolsQueue(ctx)
	if err != nil {
		return nil, err
	}
	ddb, set := e.DynamoDB(), e.Resources
	return toolgate.New(toolgate.Options{
		Sessions: e.SessionStore(),
		Records:  dynamo.NewToolCalls(ddb, set.Idempotency.Name),
		Executor: &toolgate.Effects{Blob: e.Bucket(), Registry: e.Registry(), Sessions: e.SessionStore(), Runs: dynamo.NewRuns(ddb, set.Jobs.Name)},
		Queue:    q,
		Log:      e.Log,
	}), nil
}
