package wiring

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/remote-agents/remote-agents/shared/apigwpush"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/checkpoint"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/metrics"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/report"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/s3blob"
	"github.com/remote-agents/remote-agents/shared/secrets"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sqsqueue"
	"github.com/remote-agents/remote-agents/shared/viewerpush"
)

// Env is what a process builds its functions from. Set the exported fields
// (or use FromEnvironment); the rest is built on first use. An Env is not safe
// for concurrent use while functions are being built; the handlers it builds
// are.
type Env struct {
	Config    config.Platform
	AWS       aws.Config
	Resources resources.Set
	Log       *slog.Logger
	// Launcher, if set, starts sandboxes instead of Fargate (the dev server's
	// local processes).
	Launcher launch.Launcher
	// KeyLookup reads the model providers' keys that no secret holds, by
	// their usual variables (ANTHROPIC_API_KEY…); nil: the process's
	// environment (the dev server's).
	KeyLookup func(name string) (string, bool)
	// Metered, if set, hears the usage of each model call once recorded
	// (tests).
	Metered func(sessionID string, u session.Usage)
	// AllowScripted lets agent profiles name the scripted model provider
	// (the dev stack).
	AllowScripted bool
	// SandboxImage is what sandboxes run, for the warm pool to retire the
	// sandboxes of another (the dev server's sandbox command); "" the
	// Fargate task definition.
	SandboxImage string
	// NoPoolRefillOnClaim leaves refilling the warm pool to the schedule
	// (tests that count claims exactly).
	NoPoolRefillOnClaim bool
	// SecretStore, if set, keeps apps' secrets instead of Secrets Manager
	// (the dev server's memory: package secretstore).
	SecretStore secrets.Store

	ddb        *dynamodb.Client
	sqs        *sqs.Client
	bucket     *s3blob.Store
	sessions   *dynamo.Sessions
	registry   *dynamo.Registry
	queues     map[string]*sqsqueue.Queue
	reporter   *report.Reporter
	guardrails guardrails.Source
	notifier   *apigwpush.Notifier
	viewers    *viewerpush.Hub

	mu    sync.Mutex
	built map[any]any // what Once built, by key
}

// FromEnvironment loads the platform configuration (config.Load) and the AWS
// configuration, as a Lambda function does at cold start.
func FromEnvironment(ctx context.Context) (*Env, error) {
	cfg, err := config.Load()
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsconfig.Load(ctx)
	if err != nil {
		return nil, err
	}
	return New(cfg, awsCfg, slog.New(slog.NewJSONHandler(os.Stdout, nil)))
}

// New returns an Env over the configuration cfg and the AWS configuration.
func New(cfg config.Platform, awsCfg aws.Config, log *slog.Logger) (*Env, error) {
	set, err := resources.For(cfg.Env)
	if err != nil {
		return nil, fmt.Errorf("RA_ENV: %w", err)
	}
	return &Env{Config: cfg, AWS: awsCfg, Resources: set, Log: log}, nil
}

// Once returns what build made the first time it was asked for key in e,
// and the same value every later time: the packages that build what several
// functions share (a service over the Env's stores) keep it in the Env, so
// that every function built in one Env shares one. key is a value of a type
// of the asking package, as with context keys. An error is not kept: the
// next call builds again. build may call Once for other keys.
func Once[T any](e *Env, key any, build func() (T, error)) (T, error) {
	e.mu.Lock()
	v, ok := e.built[key]
	e.mu.Unlock()
	if ok {
		return v.(T), nil
	}
	t, err := build()
	if err != nil {
		return t, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.built[key]; ok {
		return v.(T), nil
	}
	if e.built == nil {
		e.built = map[any]any{}
	}
	e.built[key] = t
	return t, nil
}

// DynamoDB is the DynamoDB client.
func (e *Env) DynamoDB() *dynamodb.Client {
	if e.ddb == nil {
		e.ddb = awsconfig.NewDynamoDB(e.AWS)
	}
	return e.ddb
}

// SessionStore is the sessions, idempotency and events tables.
func (e *Env) SessionStore() *dynamo.Sessions {
	if e.sessions == nil {
		set := e.Resources
		e.sessions = dynamo.NewSessions(e.DynamoDB(), set.Sessions.Name, set.Idempotency.Name, set.Events.Name)
		e.sessions.OnEnd = sessionEnded(e.Log)
		if hub := e.Viewers(); hub != nil {
			// Whoever appends an event pushes it to the agent's viewers.
			e.sessions.OnAppend = hub.Appended
		}
	}
	return e.sessions
}

// Viewers pushes to agents' viewers over the push channel (RA_PUSH_ENDPOINT)
// and serves them there; nil when none is configured: viewers then read
// the event stream.
func (e *Env) Viewers() *viewerpush.Hub {
	n := e.Notifier()
	if n == nil {
		return nil
	}
	if e.viewers == nil {
		e.viewers = &viewerpush.Hub{Notifier: n, MaxViewers: e.Config.Quotas.StreamsPerSession, Log: e.Log}
		e.viewers.Store = e.SessionStore()
	}
	return e.viewers
}

// Registry is the registry table: projects, personas, app keys, configurations.
func (e *Env) Registry() *dynamo.Registry {
	if e.registry == nil {
		e.registry = dynamo.NewRegistry(e.DynamoDB(), e.Resources.Registry.Name)
		q := e.Config.Quotas
		e.registry.TypeQuota = registry.TypeQuota{Types: q.AgentTypes, PoolSandboxes: q.PoolQuota()}
	}
	return e.registry
}

// Bucket is the outputs bucket.
func (e *Env) Bucket() *s3blob.Store {
	if e.bucket == nil {
		e.bucket = s3blob.New(awsconfig.NewS3(e.AWS), e.Resources.Bucket.Name)
	}
	return e.bucket
}

// Checkpoints keeps agents' checkpoints, in the bucket.
func (e *Env) Checkpoints() *checkpoint.Service {
	return &checkpoint.Service{Objects: e.Bucket()}
}

// BucketOrigin is the origin (scheme://host[:port]) the bucket's presigned
// URLs point at: where browsers PUT attachments and sandboxes their
// outputs; "" if none can be made. Presigning is local: nothing is called.
func (e *Env) BucketOrigin(ctx context.Context) string {
	u, err := e.Bucket().PresignPut(ctx, "origin-probe", "", 0, time.Minute)
	if err != nil {
		return ""
	}
	parsed, err := url.Parse(u.URL)
	if err != nil || parsed.Host == "" {
		return ""
	}
	return parsed.Scheme + "://" + parsed.Host
}

// Queue returns the queue called name, at url if given, else looked up by
// name; once per name.
func (e *Env) Queue(ctx context.Context, name, url string) (*sqsqueue.Queue, error) {
	if q, ok := e.queues[name]; ok {
		return q, nil
	}
	if e.sqs == nil {
		e.sqs = awsconfig.NewSQS(e.AWS)
	}
	if url == "" {
		out, err := e.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
		if err != nil {
			return nil, fmt.Errorf("find queue %s (or set its URL in the environment): %w", name, err)
		}
		url = aws.ToString(out.QueueUrl)
	}
	if e.queues == nil {
		e.queues = map[string]*sqsqueue.Queue{}
	}
	e.queues[name] = sqsqueue.New(e.sqs, url)
	return e.queues[name], nil
}

// JobsQueue is the jobs queue (RA_JOBS_QUEUE_URL, else looked up by name).
func (e *Env) JobsQueue(ctx context.Context) (*sqsqueue.Queue, error) {
	return e.Queue(ctx, e.Resources.JobsQueue.Name, e.Config.Queues.Jobs)
}

// Jobs publishes jobs-queue messages.
func (e *Env) Jobs(ctx context.Context) (*jobqueue.Publisher, error) {
	q, err := e.JobsQueue(ctx)
	if err != nil {
		return nil, err
	}
	return jobqueue.NewPublisher(q), nil
}

// OrchestratorQueue is the queue the orchestrator reads job events on
// (RA_ORCHESTRATOR_QUEUE_URL, else looked up by name).
func (e *Env) OrchestratorQueue(ctx context.Context) (*sqsqueue.Queue, error) {
	return e.Queue(ctx, e.Resources.OrchestratorQueue.Name, e.Config.OrchestratorQueue)
}

// ToolsQueue is the tools queue (RA_TOOLS_QUEUE_URL, else looked up by name).
func (e *Env) ToolsQueue(ctx context.Context) (*sqsqueue.Queue, error) {
	return e.Queue(ctx, e.Resources.ToolsQueue.Name, e.Config.Queues.Tools)
}

// WebhooksQueue is the webhooks queue (RA_WEBHOOKS_QUEUE_URL, else looked
// up by name).
func (e *Env) WebhooksQueue(ctx context.Context) (*sqsqueue.Queue, error) {
	return e.Queue(ctx, e.Resources.WebhooksQueue.Name, e.Config.Queues.Webhooks)
}

// WebhooksDLQ is the webhooks queue's dead-letter queue, which deliveries
// refused for a day go to (RA_WEBHOOKS_DLQ_URL, else looked up by name).
func (e *Env) WebhooksDLQ(ctx context.Context) (*sqsqueue.Queue, error) {
	return e.Queue(ctx, e.Resources.WebhooksQueue.DeadLetterName, e.Config.Queues.WebhooksDLQ)
}

// Notifier pushes to sandboxes over the push channel's @connections
// (RA_PUSH_ENDPOINT); nil when none is configured: sandboxes then only poll.
func (e *Env) Notifier() session.Notifier {
	if e.Config.Push.Endpoint == "" {
		return nil
	}
	if e.notifier == nil {
		e.notifier = apigwpush.New(apigwpush.NewClient(e.AWS, e.Config.Push.Endpoint))
	}
	return e.notifier
}

// Reporter records exceptions: a structured log line, and the webhook if one
// is configured.
func (e *Env) Reporter() *report.Reporter {
	if e.reporter == nil {
		e.reporter = report.New(e.Log, e.Config.ExceptionWebhookURL)
	}
	return e.reporter
}

// Guardrails is where the guardrails document is read from: a file, or an
// object when the path is s3://bucket/key.
func (e *Env) Guardrails() guardrails.Source {
	if e.guardrails == nil {
		path := e.Config.GuardrailsPath
		if bucket, key, ok := guardrails.ParseS3URI(path); ok {
			e.guardrails = guardrails.Object{Store: s3blob.New(awsconfig.NewS3(e.AWS), bucket), URI: path, Key: key}
		} else {
			e.guardrails = guardrails.File(path)
		}
	}
	return e.guardrails
}

// ToolResults is the workspace tool results' store.
func (e *Env) ToolResults() *dynamo.ToolResults {
	return dynamo.NewToolResults(e.DynamoDB(), e.Resources.Idempotency.Name)
}

// PoolStore is the warm pool's store: its items in the registry table,
// claimed in transactions with the sessions table.
func (e *Env) PoolStore() *dynamo.Pool {
	return dynamo.NewPool(e.DynamoDB(), e.Resources.Registry.Name, e.Resources.Sessions.Name)
}

// Quotas are the configuration's quotas, as the creator and event streams take them.
func (e *Env) Quotas() session.Quotas {
	q := e.Config.Quotas
	return session.Quotas{ConcurrentSessions: q.ConcurrentSessions, CreatesPerMinute: q.CreatesPerMinute, StreamsPerSession: q.StreamsPerSession,
		Uploads:        session.UploadQuota{URLs: q.UploadsPerSession, Bytes: int64(q.UploadGiBPerSession) << 30},
		DailyBudgetUSD: e.Config.SessionLimits.MaxCostUSDPerDay, MonthlyBudgetUSD: e.Config.SessionLimits.MaxCostUSDPerMonth}
}

// Limits are the configuration's session limits, as the session control
// takes them.
func (e *Env) Limits() registry.SessionLimits {
	l := e.Config.SessionLimits
	return registry.SessionLimits{MaxSessionSeconds: l.MaxSessionSeconds, IdleTimeoutSeconds: l.IdleTimeoutSeconds, MaxTokens: l.MaxTokens, MaxCostUSD: l.MaxCostUSD}
}

// sessionEnded writes an ended session's metrics: its tokens, cost and
// life, and whether it was ended at its maximum time.
func sessionEnded(log *slog.Logger) func(context.Context, session.Session) {
	return func(ctx context.Context, s session.Session) {
		u := s.Usage()
		values := []metrics.Value{
			{Name: metrics.SessionTokens, Value: float64(u.InputTokens + u.OutputTokens), Unit: "Count"},
			{Name: metrics.SessionCostUSD, Value: u.CostUSD, Unit: "None"},
			{Name: metrics.SessionSeconds, Value: s.EndedAt.Sub(s.CreatedAt).Seconds(), Unit: "Seconds"},
		}
		if s.Reason == session.ReasonMaxDuration {
			values = append(values, metrics.Value{Name: metrics.SessionsAtMaxDuration, Value: 1, Unit: "Count"})
		}
		metrics.Emit(ctx, log, s.Tenant, values, slog.String("session_id", s.ID), slog.String("reason", string(s.Reason)))
	}
}
