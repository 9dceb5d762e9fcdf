// Package system builds, once per process, everything the system's processes share:
// configuration, AWS clients, stores, queues and services. Lambda functions call
// New at cold start and hand one piece to lambda.Start; the dev server serves all.
package system

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/embed"
	"github.com/remote-agents/remote-agents/shared/eventsapi"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/jobs"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/report"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/s3blob"
	"github.com/remote-agents/remote-agents/shared/sandboxapi"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sqsqueue"
	"github.com/remote-agents/remote-agents/shared/toolapi"
	"github.com/remote-agents/remote-agents/shared/toolgate"
)

// System is the process's wiring.
type System struct {
	Config    config.RemoteAgents
	AWS       aws.Config
	Resources resources.Set
	Log       *slog.Logger
	Reporter  *report.Reporter
	Registry  registry.Store
	Sessions  *session.Service
	Store     session.Store
	// JobsQueue and JobsDLQ are the jobs queue and its dead-letter queue.
	JobsQueue *sqsqueue.Queue
	JobsDLQ   *sqsqueue.Queue
	Jobs      *jobs.Publisher
	// ToolsQueue and ToolsDLQ carry long gateway tool calls to jobworker.
	ToolsQueue *sqsqueue.Queue
	ToolsDLQ   *sqsqueue.Queue
	// Tools runs the gateway-mediated tools.
	Tools  *toolgate.Service
	Bucket *s3blob.Store
	// Guardrails is where the guardrails document is read from.
	Guardrails guardrails.Source
}

// Options adjust New; the zero value reads everything from the environment.
type Options struct {
	// Config, if set, is used instead of loading config.yaml and the environment.
	Config *config.RemoteAgents
	// Log, if set, replaces the JSON logger on stdout.
	Log *slog.Logger
	// Env, if set, is used instead of RA_ENV.
	Env string
	// AWS, if set, is used instead of loading the AWS configuration.
	AWS *aws.Config
}

// New builds the system from RA_ENV (default "dev"), the remote_agents
// configuration and the AWS environment.
func New(ctx context.Context, o Options) (*System, error) {
	s := &System{Log: o.Log}
	if s.Log == nil {
		s.Log = slog.New(slog.NewJSONHandler(os.Stdout, nil))
	}
	if o.Config != nil {
		s.Config = *o.Config
	} else {
		c, err := config.Load()
		if err != nil {
			return nil, err
		}
		s.Config = c
	}
	env := o.Env
	if env == "" {
		env = os.Getenv("RA_ENV")
	}
	if env == "" {
		env = "dev"
	}
	set, err := resources.For(env)
	if err != nil {
		return nil, fmt.Errorf("RA_ENV: %w", err)
	}
	s.Resources = set
	if o.AWS != nil {
		s.AWS = *o.AWS
	} else if s.AWS, err = awsconfig.Load(ctx); err != nil {
		return nil, err
	}
	ddb := awsconfig.NewDynamoDB(s.AWS)
	sqsClient := awsconfig.NewSQS(s.AWS)
	s3Client := awsconfig.NewS3(s.AWS)

	s.Registry = dynamo.NewRegistry(ddb, set.Registry.Name)
	s.Store = dynamo.NewSessions(ddb, set.Sessions.Name, set.Idempotency.Name, set.Events.Name)
	s.Bucket = s3blob.New(s3Client, set.Bucket.Name)
	jobsURL, err := queueURL(ctx, sqsClient, "RA_JOBS_QUEUE_URL", set.JobsQueue.Name)
	if err != nil {
		return nil, err
	}
	dlqURL, err := queueURL(ctx, sqsClient, "RA_JOBS_DLQ_URL", set.JobsQueue.DeadLetterName)
	if err != nil {
		return nil, err
	}
	toolsURL, err := queueURL(ctx, sqsClient, "RA_TOOLS_QUEUE_URL", set.ToolsQueue.Name)
	if err != nil {
		return nil, err
	}
	toolsDLQURL, err := queueURL(ctx, sqsClient, "RA_TOOLS_DLQ_URL", set.ToolsQueue.DeadLetterName)
	if err != nil {
		return nil, err
	}
	s.ToolsQueue = sqsqueue.New(sqsClient, toolsURL)
	s.ToolsDLQ = sqsqueue.New(sqsClient, toolsDLQURL)
	s.JobsQueue = sqsqueue.New(sqsClient, jobsURL)
	s.JobsDLQ = sqsqueue.New(sqsClient, dlqURL)
	s.Jobs = jobs.NewPublisher(s.JobsQueue)
	s.Reporter = report.New(s.Log, s.Config.ExceptionWebhookURL)

	if bucket, key, ok := guardrails.ParseS3URI(s.Config.GuardrailsPath); ok {
		s.Guardrails = guardrails.Object{Store: s3blob.New(s3Client, bucket), URI: s.Config.GuardrailsPath, Key: key}
	} else {
		s.Guardrails = guardrails.File(s.Config.GuardrailsPath)
	}
	s.Sessions = session.NewService(session.Options{
		Store:           s.Store,
		Registry:        s.Registry,
		Guardrails:      s.Guardrails,
		Jobs:            s.Jobs,
		Reporter:        s.Reporter,
		Log:             s.Log,
		CreationTimeout: s.Config.CreationTimeout,
		PublicBaseURL:   s.Config.PublicBaseURL,
		DefaultFeatures: session.Features(s.Config.EmbedFeatures),
		Blob:            s.Bucket,
	})
	s.Tools = toolgate.New(toolgate.Options{
		Sessions: s.Store,
		Records:  dynamo.NewToolCalls(ddb, set.Idempotency.Name),
		Executor: &toolgate.Effects{Blob: s.Bucket, Registry: s.Registry, Sessions: s.Store, Runs: dynamo.NewRuns(ddb, set.Jobs.Name)},
		Queue:    s.ToolsQueue,
		AppKeys:  s.Registry,
		Log:      s.Log,
	})
	return s, nil
}

// queueURL takes a queue's URL from the environment variable, or looks it up by name.
func queueURL(ctx context.Context, api *sqs.Client, envVar, name string) (string, error) {
	if u := os.Getenv(envVar); u != "" {
		return u, nil
	}
	out, err := api.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
	if err != nil {
		return "", fmt.Errorf("find queue %s (or set %s): %w", name, envVar, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// SandboxHandlers returns the sandbox channel's handlers over the system.
func SandboxHandlers(s *System) *sandboxapi.Handlers {
	return &sandboxapi.Handlers{Channel: session.NewChannel(session.Options{Store: s.Store, Registry: s.Registry, Guardrails: s.Guardrails, Reporter: s.Reporter, Blob: s.Bucket, Log: s.Log}), Log: s.Log}
}

// EmbedHandlers returns the embed view's handlers over the system.
func EmbedHandlers(ctx context.Context, s *System) *embed.Handlers {
	return &embed.Handlers{Sessions: s.Sessions, AllowedOrigins: s.Config.AllowedOrigins, UploadOrigin: uploadOrigin(ctx, s), Log: s.Log}
}

// EventsHandlers returns the events stream's handlers over the system; streams
// end after maxDuration (0: when the client goes).
func EventsHandlers(s *System, maxDuration time.Duration) *eventsapi.Handlers {
	return &eventsapi.Handlers{Sessions: s.Sessions, Store: s.Store, Log: s.Log, MaxDuration: maxDuration}
}

// uploadOrigin is the origin presigned upload URLs point at.
func uploadOrigin(ctx context.Context, s *System) string {
	u, err := s.Bucket.PresignPut(ctx, "origin-probe", "", time.Minute)
	if err != nil {
		return ""
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return parsed.Scheme + "://" + parsed.Host
}

// ToolHandlers returns the tool callback route's handlers over the system.
func ToolHandlers(s *System) *toolapi.Handlers {
	return &toolapi.Handlers{Gate: s.Tools, Log: s.Log}
}
