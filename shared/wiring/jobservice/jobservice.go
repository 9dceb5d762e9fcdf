// Package jobservice builds the orchestrator jobs' service for an Env, as
// the functions that move jobs along use it (jobs, sandbox, jobworker), and
// the publisher of the jobs' events; each once per Env.
package jobservice

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/eventbus"
	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/jobevents/queuepub"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// key names what this package keeps in an Env (wiring.Once).
type key int

const (
	serviceKey key = iota
	runsKey
	eventsKey
)

// Service is the orchestrator jobs' service as the jobs function uses it: it
// queues job.run and job.cancel. Its events go to the jobs' bus (Events).
func Service(ctx context.Context, e *wiring.Env) (*job.Service, error) {
	return wiring.Once(e, serviceKey, func() (*job.Service, error) {
		dispatch, err := e.Jobs(ctx)
		if err != nil {
			return nil, err
		}
		o, err := options(ctx, e)
		if err != nil {
			return nil, err
		}
		o.Jobs = dispatch
		return job.New(o), nil
	})
}

// Runs is the jobs' service of the functions that move jobs along but queue
// nothing (the sandbox channel, jobworker).
func Runs(ctx context.Context, e *wiring.Env) (*job.Service, error) {
	return wiring.Once(e, runsKey, func() (*job.Service, error) {
		o, err := options(ctx, e)
		if err != nil {
			return nil, err
		}
		return job.New(o), nil
	})
}

func options(ctx context.Context, e *wiring.Env) (job.Options, error) {
	pub, err := Events(ctx, e)
	if err != nil {
		return job.Options{}, err
	}
	return job.Options{
		Store:         dynamo.NewJobs(e.DynamoDB(), e.Resources.Jobs.Name, e.Resources.Registry.Name),
		Publisher:     pub,
		Sessions:      e.SessionStore(),
		Bucket:        e.Resources.Bucket.Name,
		Logs:          e.Bucket(),
		AllowScripted: e.AllowScripted,
		Retention:     time.Duration(e.Config.JobRetentionDays) * 24 * time.Hour,
		Log:           e.Log,
	}, nil
}

// EventsOnEventBridge reports where this process publishes the jobs'
// events: on the EventBridge bus jobevents.BusName(env) when the environment
// reaches an EventBridge (AWS, where no endpoint is overridden; LocalStack,
// whose AWS_ENDPOINT_URL serves every service; or an explicit
// AWS_ENDPOINT_URL_EVENTBRIDGE), else straight onto the orchestrator queue
// (the bundled emulators, which set only the DynamoDB, SQS and S3 endpoints).
// The orchestrator reads the same envelope from the orchestrator queue either
// way: on EventBridge a rule forwards the events there.
func EventsOnEventBridge() bool {
	return awsconfig.Endpoint(awsconfig.EventBridge) != "" || !awsconfig.Overridden()
}

// Events is the publisher of the jobs' events (EventsOnEventBridge says
// which), built once per Env.
func Events(ctx context.Context, e *wiring.Env) (jobevents.Publisher, error) {
	return wiring.Once(e, eventsKey, func() (jobevents.Publisher, error) {
		if EventsOnEventBridge() {
			return eventbus.New(eventbridge.NewFromConfig(e.AWS), jobevents.BusName(e.Resources.Env)), nil
		}
		q, err := e.OrchestratorQueue(ctx)
		if err != nil {
			return nil, err
		}
		return queuepub.New(q, queuepub.LocalAccount, e.AWS.Region), nil
	})
}
