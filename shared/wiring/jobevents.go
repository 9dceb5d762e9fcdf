package wiring

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/eventbus"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/jobevents/queuepub"
)

// JobEventsOnEventBridge reports where this process publishes the jobs'
// events: on the EventBridge bus jobevents.BusName(env) when the environment
// reaches an EventBridge (AWS, where no endpoint is overridden; LocalStack,
// whose AWS_ENDPOINT_URL serves every service; or an explicit
// AWS_ENDPOINT_URL_EVENTBRIDGE), else straight onto the orchestrator queue
// (the bundled emulators, which set only the DynamoDB, SQS and S3 endpoints).
// The orchestrator reads the same envelope from the orchestrator queue either
// way: on EventBridge a rule forwards the events there.
func JobEventsOnEventBridge() bool {
	return awsconfig.Endpoint(awsconfig.EventBridge) != "" || !awsconfig.Overridden()
}

// JobEvents is the publisher of the jobs' events (JobEventsOnEventBridge
// says which), built once.
func (e *Env) JobEvents(ctx context.Context) (jobevents.Publisher, error) {
	if e.jobEvents != nil {
		return e.jobEvents, nil
	}
	if JobEventsOnEventBridge() {
		e.jobEvents = eventbus.New(awsconfig.NewEventBridge(e.AWS), jobevents.BusName(e.Resources.Env))
		return e.jobEvents, nil
	}
	q, err := e.OrchestratorQueue(ctx)
	if err != nil {
		return nil, err
	}
	e.jobEvents = queuepub.New(q, queuepub.LocalAccount, e.AWS.Region)
	return e.jobEvents, nil
}
