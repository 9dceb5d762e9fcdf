package wiring

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/remote-agents/remote-agents/data"
	"github.com/remote-agents/remote-agents/shared/agenttype"
	"github.com/remote-agents/remote-agents/shared/apigwpush"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/jobs"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/metrics"
	"github.com/remote-agents/remote-agents/shared/modelgateway"
	"github.com/remote-agents/remote-agents/shared/pool"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/report"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/s3blob"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sqsqueue"
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

	ddb        *dynamodb.Client
	sqs        *sqs.Client
	bucket     *s3blob.Store
	sessions   *dynamo.Sessions
	registry   *dynamo.Registry
	agentTypes *agenttype.Service
	queues     map[string]*sqsqueue.Queue
	reporter   *report.Reporter
	guardrails guardrails.Source
	notifier   *apigwpush.Notifier
	jobEvents  jobevents.Publisher
	jobService *job.Service
	jobRuns    *job.Service
	pool       *pool.Service
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

func (e *Env) dynamoDB() *dynamodb.Client {
	if e.ddb == nil {
		e.ddb = awsconfig.NewDynamoDB(e.AWS)
	}
	return e.ddb
}

// SessionStore is the sessions, idempotency and events tables.
func (e *Env) SessionStore() *dynamo.Sessions {
	if e.sessions == nil {
		set := e.Resources
		e.sessions = dynamo.NewSessions(e.dynamoDB(), set.Sessions.Name, set.Idempotency.Name, set.Events.Name)
		e.sessions.OnEnd = sessionEnded(e.Log)
	}
	return e.sessions
}

// Registry is the registry table: projects, personas, app keys, configurations.
func (e *Env) Registry() *dynamo.Registry {
	if e.registry == nil {
		e.registry = dynamo.NewRegistry(e.dynamoDB(), e.Resources.Registry.Name)
	}
	return e.registry
}

// AgentTypes is the agent type service over the registry, with the
// configuration's workspace defaults.
func (e *Env) AgentTypes() *agenttype.Service {
	if e.agentTypes == nil {
		d := e.Config.WorkspaceDefaults
		e.agentTypes = agenttype.New(agenttype.Options{
			Registry: e.Registry(),
			Defaults: registry.ResourceLimits{CPU: d.CPU, Memory: d.Memory, Disk: d.Disk},
			// A fixed repository may be served over plain http or git by them.
			GitInsecureHosts: e.Config.GitInsecureHosts,
			Pool:             poolCounter{e},
		})
	}
	return e.agentTypes
}

// Bucket is the outputs bucket.
func (e *Env) Bucket() *s3blob.Store {
	if e.bucket == nil {
		e.bucket = s3blob.New(awsconfig.NewS3(e.AWS), e.Resources.Bucket.Name)
	}
	return e.bucket
}

// queue returns the queue called name, at url if given, else looked up.
func (e *Env) queue(ctx context.Context, name, url string) (*sqsqueue.Queue, error) {
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
	return e.queue(ctx, e.Resources.JobsQueue.Name, e.Config.Queues.Jobs)
}

// Jobs publishes jobs-queue messages.
func (e *Env) Jobs(ctx context.Context) (*jobs.Publisher, error) {
	q, err := e.JobsQueue(ctx)
	if err != nil {
		return nil, err
	}
	return jobs.NewPublisher(q), nil
}

// OrchestratorQueue is the queue the orchestrator reads job events on
// (RA_ORCHESTRATOR_QUEUE_URL, else looked up by name).
func (e *Env) OrchestratorQueue(ctx context.Context) (*sqsqueue.Queue, error) {
	return e.queue(ctx, e.Resources.OrchestratorQueue.Name, e.Config.OrchestratorQueue)
}

// JobService is the orchestrator jobs' service, as the jobs function uses
// it: it queues job.run and job.cancel. Its events go to the jobs' bus
// (JobEvents).
func (e *Env) JobService(ctx context.Context) (*job.Service, error) {
	if e.jobService != nil {
		return e.jobService, nil
	}
	dispatch, err := e.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	o, err := e.jobOptions(ctx)
	if err != nil {
		return nil, err
	}
	o.Jobs = dispatch
	e.jobService = job.New(o)
	return e.jobService, nil
}

// JobRuns is the jobs' service of the functions that move jobs along but
// queue nothing (the sandbox channel, jobworker).
func (e *Env) JobRuns(ctx context.Context) (*job.Service, error) {
	if e.jobRuns != nil {
		return e.jobRuns, nil
	}
	o, err := e.jobOptions(ctx)
	if err != nil {
		return nil, err
	}
	e.jobRuns = job.New(o)
	return e.jobRuns, nil
}

func (e *Env) jobOptions(ctx context.Context) (job.Options, error) {
	pub, err := e.JobEvents(ctx)
	if err != nil {
		return job.Options{}, err
	}
	return job.Options{
		Store:         dynamo.NewJobs(e.dynamoDB(), e.Resources.Jobs.Name, e.Resources.Registry.Name),
		Publisher:     pub,
		Sessions:      e.SessionStore(),
		Bucket:        e.Resources.Bucket.Name,
		Logs:          e.Bucket(),
		AllowScripted: e.AllowScripted,
		Log:           e.Log,
	}, nil
}

// ToolsQueue is the tools queue (RA_TOOLS_QUEUE_URL, else looked up by name).
func (e *Env) ToolsQueue(ctx context.Context) (*sqsqueue.Queue, error) {
	return e.queue(ctx, e.Resources.ToolsQueue.Name, e.Config.Queues.Tools)
}

func (e *Env) dlqs(ctx context.Context) (jobsDLQ, toolsDLQ *sqsqueue.Queue, err error) {
	if jobsDLQ, err = e.queue(ctx, e.Resources.JobsQueue.DeadLetterName, e.Config.Queues.JobsDLQ); err != nil {
		return nil, nil, err
	}
	toolsDLQ, err = e.queue(ctx, e.Resources.ToolsQueue.DeadLetterName, e.Config.Queues.ToolsDLQ)
	return jobsDLQ, toolsDLQ, err
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

// Pool is the warm pool over the registry and sessions tables: its
// sandboxes are launched with the Launcher (jobworker's), told of their
// claims over the push channel, and retired when the guardrails, the
// sandbox image or their type's configuration change.
func (e *Env) Pool() *pool.Service {
	if e.pool == nil {
		e.pool = pool.New(pool.Options{
			Store:    e.PoolStore(),
			Types:    e.AgentTypes(),
			Launcher: e.Launcher,
			Notifier: e.Notifier(),
			Guardrails: func(ctx context.Context) (string, error) {
				doc, err := guardrails.Load(ctx, e.Guardrails())
				return doc.Hash, err
			},
			Image:           cmp.Or(e.SandboxImage, e.Config.Fargate.TaskDefinition),
			GatewayURL:      e.Config.GatewayURL,
			ModelGatewayURL: e.Config.Model.GatewayURL,
			PushURL:         e.Config.Push.URL,
			RefillOnClaim:   !e.NoPoolRefillOnClaim,
			// A fixed repository is cloned by the pool's sandboxes.
			GitInsecureHosts: e.Config.GitInsecureHosts,
			Metric:           poolMetric(e.Log),
			Log:              e.Log,
		})
	}
	return e.pool
}

// poolMetric writes each start's pool outcome as a CloudWatch embedded
// metric (namespace RemoteAgents, metric WarmPoolClaims or WarmPoolMisses,
// by agent type): Lambda's logs turn the line into the metric.
func poolMetric(log *slog.Logger) func(context.Context, string, bool) {
	return func(ctx context.Context, agentType string, warm bool) {
		name := "WarmPoolMisses"
		if warm {
			name = "WarmPoolClaims"
		}
		log.InfoContext(ctx, "warm pool "+name,
			slog.Any("_aws", map[string]any{
				"Timestamp": time.Now().UnixMilli(),
				"CloudWatchMetrics": []map[string]any{{
					"Namespace":  "RemoteAgents",
					"Dimensions": [][]string{{"AgentType"}},
					"Metrics":    []map[string]string{{"Name": name, "Unit": "Count"}},
				}},
			}),
			slog.String("AgentType", agentType), slog.Int(name, 1))
	}
}

// poolCounter counts with the Env's pool, built when first counted (the pool
// is built over the agent types).
type poolCounter struct{ e *Env }

func (c poolCounter) Count(ctx context.Context, t registry.AgentType) (idle, starting int, err error) {
	return c.e.Pool().Count(ctx, t)
}

// PoolStore is the warm pool's store: its items in the registry table,
// claimed in transactions with the sessions table.
func (e *Env) PoolStore() *dynamo.Pool {
	return dynamo.NewPool(e.dynamoDB(), e.Resources.Registry.Name, e.Resources.Sessions.Name)
}

// quotas are the configuration's quotas, as the session service takes them.
func (e *Env) quotas() session.Quotas {
	q := e.Config.Quotas
	return session.Quotas{ConcurrentSessions: q.ConcurrentSessions, CreatesPerMinute: q.CreatesPerMinute, StreamsPerSession: q.StreamsPerSession,
		DailyBudgetUSD: e.Config.SessionLimits.MaxCostUSDPerDay}
}

// limits are the configuration's session limits, as the session service
// takes them.
func (e *Env) limits() registry.SessionLimits {
	l := e.Config.SessionLimits
	return registry.SessionLimits{MaxSessionSeconds: l.MaxSessionSeconds, IdleTimeoutSeconds: l.IdleTimeoutSeconds, MaxTokens: l.MaxTokens, MaxCostUSD: l.MaxCostUSD}
}

// prices is the price table model calls are costed by: the file the
// configuration names, else the shipped one.
func (e *Env) prices() (modelgateway.Prices, error) {
	raw := data.ModelPrices
	if path := e.Config.SessionLimits.PriceTablePath; path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("price table (RA_PRICE_TABLE): %w", err)
		}
		raw = b
	}
	return modelgateway.ParsePrices(raw)
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
