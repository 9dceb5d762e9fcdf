// Package stack is Remote Agents on AWS, one CloudFormation stack per
// environment: the HTTP API with one Lambda function per route group, the queues
// and their workers, the webhooks function on the events table's stream, the
// tables and the bucket (all from shared/resources), the
// Fargate sandboxes, the streaming routes (events, model calls) behind
// CloudFront, the model providers' secrets, alarms.
//
// Nothing here is invented twice: names, keys, GSIs and TTLs come from
// resources.For(env), routes and functions from routes.All(), the model
// providers' secrets from package models; the tests compare
// the synthesized template with both.
package stack

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecr"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3deployment"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/remote-agents/remote-agents/infra/models"
	"github.com/remote-agents/remote-agents/shared/access"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/metrics"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// Props configure one environment's stack.
type Props struct {
	awscdk.StackProps
	// Env names the environment: dev, staging, prod (or any valid name).
	Env string
	// Target is where the stack runs: AWS (the zero value), SAM (AWS's stack
	// with the variables `sam local` overrides) or LocalStack (the variant
	// community LocalStack deploys; local.go).
	Target Target
	// CodeDir holds dist/<function>.zip from `make build`.
	CodeDir string
	// DataDir holds platform-guardrails.md, deployed to the bucket.
	DataDir string
	// SandboxImage is a prebuilt sandbox image URI; empty uses the stack's ECR
	// repository (tag "latest"), unless BuildSandboxImage builds sandbox/Dockerfile
	// from RepoDir as an image asset (needs Docker at synth).
	SandboxImage      string
	BuildSandboxImage bool
	RepoDir           string
	// Remote agents configuration, passed to the functions as RA_* variables.
	AllowedOrigins  []string
	CreationTimeout int
	EmbedFeatures   []string
	// Models are the sandboxes' default model (RA_LLM_PROVIDER, RA_LLM_MODEL of
	// the task definition) and the Bedrock models the model function may invoke.
	Models models.Settings
	// Throttle is the API stage's default route throttling; zero fields take
	// DefaultThrottle's.
	Throttle Throttle
	// OrchestratorRoleARN is the only caller of the /internal/ routes (IAM
	// authorization; the jobs function checks the caller is this role);
	// "" the role ra-<env>-orchestrator of the stack's account.
	OrchestratorRoleARN string
	// DailyCostAlarmUSD is the daily model cost the stack alarms at
	// (context dailyCostAlarmUSD.<env>); 0: DefaultDailyCostAlarmUSD.
	DailyCostAlarmUSD float64

	// Routes is the route table, routes.All() when nil; Access is each
	// function's access, access.For when nil. Tests give their own.
	Routes []routes.Route
	Access func(function string) (access.Access, bool)
}

// DefaultDailyCostAlarmUSD is the daily model cost the stack alarms at
// unless the environment sets its own.
const DefaultDailyCostAlarmUSD = 100

// Prod reports whether env keeps its data on stack deletion.
func Prod(env string) bool { return env == "prod" }

// Stack is one environment.
type Stack struct {
	awscdk.Stack
	Set       resources.Set
	Tables    map[string]awsdynamodb.ITable
	Queues    map[string]awssqs.IQueue
	Bucket    awss3.IBucket
	Functions map[string]awslambda.Function
	API       awsapigatewayv2.HttpApi
	// PushAPI is the push channel's WebSocket API.
	PushAPI awsapigatewayv2.WebSocketApi
	// Routes is the route table the stack serves.
	Routes []routes.Route
	// Model is the function of the model route; Secrets are the providers'
	// secrets it alone reads, by provider.
	Model   string
	Secrets map[string]awssecretsmanager.CfnSecret

	access func(function string) (access.Access, bool)
	models models.Settings
	// dailyCostAlarmUSD is Props.DailyCostAlarmUSD, defaulted.
	dailyCostAlarmUSD float64
	urls              map[string]awslambda.FunctionUrl
}

// New builds the stack of one environment.
func New(scope constructs.Construct, id string, p Props) *Stack {
	set, err := resources.For(p.Env)
	if err != nil {
		panic(err)
	}
	if err := p.Models.Validate(); err != nil {
		panic(err)
	}
	// As the handlers read RA_ALLOWED_ORIGINS, so that API Gateway's CORS, the
	// bucket's and the handlers' agree.
	if p.AllowedOrigins, err = config.Origins("allowedOrigins", p.AllowedOrigins); err != nil {
		panic(err)
	}
	if p.Routes == nil {
		p.Routes = routes.All()
	}
	if p.Access == nil {
		p.Access = access.For
	}
	model, err := modelFunction(p.Routes)
	if err != nil {
		panic(err)
	}
	st := awscdk.NewStack(scope, jsii.String(id), &p.StackProps)
	s := &Stack{Stack: st, Set: set, Tables: map[string]awsdynamodb.ITable{}, Queues: map[string]awssqs.IQueue{}, Functions: map[string]awslambda.Function{},
		Routes: p.Routes, Model: model, access: p.Access, models: p.Models, dailyCostAlarmUSD: p.DailyCostAlarmUSD}
	if s.dailyCostAlarmUSD <= 0 {
		s.dailyCostAlarmUSD = DefaultDailyCostAlarmUSD
	}
	removal := awscdk.RemovalPolicy_DESTROY
	if Prod(p.Env) {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	awscdk.Tags_Of(st).Add(jsii.String("remote-agents:env"), jsii.String(p.Env), nil)
	if p.Target == LocalStack {
		s.localStack(p)
		return s
	}

	data := s.data(p, removal)
	s.secrets(removal)
	sandbox := s.sandboxes(p, removal)
	streams := s.functions(p, removal)
	s.stage(p, removal)
	dist := s.distribution(streams)
	public := jsii.String("https://" + *dist.DistributionDomainName())
	s.uploadsFrom(data, p, public)
	s.Functions["create"].AddEnvironment(jsii.String("RA_PUBLIC_BASE_URL"), public, nil)
	s.grant(sandbox)
	push := s.push(p, removal)
	fenced := s.egress(p, removal, sandbox, public, push)
	s.sandboxProxy(p, removal, sandbox, fenced)
	s.workerEnvironment(sandbox, fenced, public)
	s.grantAppSecrets(AppSecretsFunction)
	s.eventSources()
	s.streamSources()
	s.sandboxStopped(p, sandbox.cluster.ClusterArn())
	s.jobEvents(p)
	s.alarms()

	awscdk.NewCfnOutput(st, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{Value: s.API.ApiEndpoint()})
	awscdk.NewCfnOutput(st, jsii.String("PublicUrl"), &awscdk.CfnOutputProps{Value: public})
	awscdk.NewCfnOutput(st, jsii.String("SandboxRepositoryUri"), &awscdk.CfnOutputProps{Value: sandbox.repository})
	s.modelOutputs()
	s.suppressFindings()
	return s
}

// data adds the tables, the queues with their dead-letter queues, and the
// bucket with the guardrails document in it; it returns the bucket.
func (s *Stack) data(p Props, removal awscdk.RemovalPolicy) awss3.Bucket {
	st, set := s.Stack, s.Set
	for _, t := range set.Tables() {
		s.Tables[t.Name] = table(st, s.id(t.Name, "Table"), t, removal, Prod(p.Env))
	}
	for _, q := range set.Queues() {
		dlq := awssqs.NewQueue(st, jsii.String(s.id(q.DeadLetterName, "Queue")), &awssqs.QueueProps{
			QueueName:       jsii.String(q.DeadLetterName),
			RetentionPeriod: awscdk.Duration_Seconds(jsii.Number(q.DeadLetterRetention.Seconds())),
			Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:      jsii.Bool(true),
			RemovalPolicy:   removal,
		})
		s.Queues[q.DeadLetterName] = dlq
		s.Queues[q.Name] = awssqs.NewQueue(st, jsii.String(s.id(q.Name, "Queue")), &awssqs.QueueProps{
			QueueName:         jsii.String(q.Name),
			VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(q.VisibilityTimeout.Seconds())),
			RetentionPeriod:   awscdk.Duration_Seconds(jsii.Number(q.Retention.Seconds())),
			DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(float64(q.MaxReceiveCount))},
			Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:        jsii.Bool(true),
			RemovalPolicy:     removal,
		})
	}
	b := bucket(st, set.Bucket.Name, p, removal)
	s.Bucket = b
	awss3deployment.NewBucketDeployment(st, jsii.String("Guardrails"), &awss3deployment.BucketDeploymentProps{
		DestinationBucket:    b,
		DestinationKeyPrefix: jsii.String(guardrailsPrefix),
		Sources:              &[]awss3deployment.ISource{awss3deployment.Source_Asset(jsii.String(p.DataDir), nil)},
		Prune:                jsii.Bool(false),
	})
	return b
}

// workerEnvironment tells the workers where the gateway is (the public
// origin: CloudFront sends the streaming routes, model calls among them, to
// their function URLs and the rest to the API) and where sandbox tasks run
// (config.Platform reads it).
func (s *Stack) workerEnvironment(sandbox sandboxes, fenced egress, gateway *string) {
	for _, name := range []string{routes.JobWorker, ToolWorker} {
		s.Functions[name].AddEnvironment(jsii.String("RA_GATEWAY_URL"), gateway, nil)
		s.Functions[name].AddEnvironment(jsii.String("RA_ECS_CLUSTER"), sandbox.cluster.ClusterArn(), nil)
		s.Functions[name].AddEnvironment(jsii.String("RA_ECS_TASK_DEFINITION"), sandbox.task.TaskDefinitionArn(), nil)
		s.Functions[name].AddEnvironment(jsii.String("RA_ECS_CONTAINER"), jsii.String(SandboxContainer), nil)
		s.Functions[name].AddEnvironment(jsii.String("RA_ECS_SUBNETS"), awscdk.Fn_Join(jsii.String(","), sandbox.subnets), nil)
		s.Functions[name].AddEnvironment(jsii.String("RA_ECS_SECURITY_GROUPS"), sandbox.group.SecurityGroupId(), nil)
		// Sandboxes whose egress policy is not open: cut off, through the
		// egress proxy.
		s.Functions[name].AddEnvironment(jsii.String("RA_ECS_ISOLATED_SECURITY_GROUPS"), fenced.isolated.SecurityGroupId(), nil)
		s.Functions[name].AddEnvironment(jsii.String("RA_EGRESS_PROXY_URL"), fenced.proxyURL, nil)
		s.Functions[name].AddEnvironment(jsii.String("RA_ECS_ASSIGN_PUBLIC_IP"), jsii.String("true"), nil)
		s.Functions[name].AddEnvironment(jsii.String("RA_ECS_CAPACITY_PROVIDER"), jsii.String("FARGATE"), nil)
	}
}

// sandboxStopped sends ECS task-state changes of stopped sandboxes to the jobs
// queue (task.state), and a sweep message every minute. An event EventBridge cannot deliver (retried for up to a
// day) lands in the rule's own dead-letter queue, which alarms.
func (s *Stack) sandboxStopped(p Props, cluster *string) {
	set := s.Set
	removal := awscdk.RemovalPolicy_DESTROY
	if Prod(p.Env) {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	dlqName := s.name(SandboxStoppedDLQ)
	dlq := awssqs.NewQueue(s.Stack, jsii.String(s.id(dlqName, "Queue")), &awssqs.QueueProps{
		QueueName:       jsii.String(dlqName),
		RetentionPeriod: awscdk.Duration_Seconds(jsii.Number(set.JobsQueue.DeadLetterRetention.Seconds())),
		EnforceSSL:      jsii.Bool(true),
		RemovalPolicy:   removal,
	})
	s.Queues[dlqName] = dlq
	if p.Target != LocalStack { // community LocalStack has no CloudWatch alarms
		s.depthAlarm(dlqName, dlq)
	}
	awsevents.NewRule(s.Stack, jsii.String("SandboxStopped"), &awsevents.RuleProps{
		RuleName:    jsii.String("ra-" + p.Env + "-sandbox-stopped"),
		Description: jsii.String("ECS task-state changes of running and stopped sandboxes, to the jobs queue (task.running, task.state)"),
		EventPattern: &awsevents.EventPattern{
			Source:     &[]*string{jsii.String("aws.ecs")},
			DetailType: &[]*string{jsii.String("ECS Task State Change")},
			Detail: &map[string]any{
				"clusterArn": []*string{cluster},
				// RUNNING: where a sandbox task is (task.running, for the
				// egress proxy to know it by); STOPPED: that it stopped.
				"lastStatus": []string{"RUNNING", "STOPPED"},
			},
		},
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewSqsQueue(s.Queues[set.JobsQueue.Name], &awseventstargets.SqsQueueProps{
			DeadLetterQueue: dlq,
			RetryAttempts:   jsii.Number(ruleRetryAttempts),
			MaxEventAge:     awscdk.Duration_Hours(jsii.Number(ruleMaxEventAgeHours)),
		})},
	})
	// The sweep: every minute, a sweep message on the jobs queue, for
	// jobworker to end the sessions whose sandbox stopped heart-beating or
	// that are stuck provisioning or ending (session.Sweeper.Sweep).
	awsevents.NewRule(s.Stack, jsii.String("Sweep"), &awsevents.RuleProps{
		RuleName:    jsii.String("ra-" + p.Env + "-sweep"),
		Description: jsii.String("Every minute, a sweep message to the jobs queue: lost and stuck sessions end"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewSqsQueue(s.Queues[set.JobsQueue.Name], &awseventstargets.SqsQueueProps{
			Message:         awsevents.RuleTargetInput_FromObject(map[string]any{"type": jobqueue.Sweep}),
			DeadLetterQueue: dlq,
			RetryAttempts:   jsii.Number(ruleRetryAttempts),
			MaxEventAge:     awscdk.Duration_Hours(jsii.Number(ruleMaxEventAgeHours)),
		})},
	})
	// The jobs' sweep (job.sweep, once a minute): the outbox's leftovers, and
	// running jobs whose sandbox is gone failed as crash.
	awsevents.NewRule(s.Stack, jsii.String("JobSweep"), &awsevents.RuleProps{
		RuleName:    jsii.String("ra-" + p.Env + "-job-sweep"),
		Description: jsii.String("The orchestrator jobs' sweep, to the jobs queue (job.sweep)"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewSqsQueue(s.Queues[set.JobsQueue.Name], &awseventstargets.SqsQueueProps{
			Message:         awsevents.RuleTargetInput_FromObject(map[string]any{"type": "job.sweep"}),
			DeadLetterQueue: dlq,
			RetryAttempts:   jsii.Number(ruleRetryAttempts),
			MaxEventAge:     awscdk.Duration_Hours(jsii.Number(ruleMaxEventAgeHours)),
		})},
	})
}

// depthAlarm alarms as soon as the dead-letter queue named name holds a message.
func (s *Stack) depthAlarm(name string, dlq awssqs.IQueue) {
	awscloudwatch.NewAlarm(s.Stack, jsii.String(s.id(name, "Depth")), &awscloudwatch.AlarmProps{
		AlarmName:          jsii.String(name + "-depth"),
		AlarmDescription:   jsii.String("Stopped-sandbox events EventBridge could not deliver to " + s.Set.JobsQueue.Name),
		Metric:             dlq.MetricApproximateNumberOfMessagesVisible(nil),
		Threshold:          jsii.Number(1),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
}

// Names used across the stack.
const (
	// ToolWorker is the function that runs the tools queue (jobworker's code).
	ToolWorker = "toolworker"
	// SandboxContainer is the sandbox task's container.
	SandboxContainer = "agent"
	// SandboxToolUser is who a sandbox's commands run as (RA_TOOL_USER): the
	// image's own user (sandbox/Dockerfile), never root.
	SandboxToolUser = "agent"
	// guardrailsPrefix is where data/ is deployed: the guardrails land at
	// access.GuardrailsKey.
	guardrailsPrefix = "platform/"
	// SandboxStoppedDLQ is the short name of the dead-letter queue of the
	// stopped-sandbox rule's target (ra-<env>-sandbox-stopped-dlq): AWS only, no
	// code reads it.
	SandboxStoppedDLQ = "sandbox-stopped-dlq"
	// EventBridge's retry policy for the rule's target: its most attempts, for
	// at most a day.
	ruleRetryAttempts    = 185
	ruleMaxEventAgeHours = 24
)

// id is the construct id of a named resource: its name without the environment
// prefix, in CamelCase, and its kind ("ra-dev-jobs", "Queue" → "JobsQueue").
func (s *Stack) id(name, kind string) string {
	return logicalID(strings.TrimPrefix(name, "ra-"+s.Set.Env+"-")) + kind
}

func logicalID(name string) string {
	var b strings.Builder
	up := true
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z':
			if up {
				r -= 'a' - 'A'
			}
			b.WriteRune(r)
			up = false
		case r >= 'A' && r <= 'Z' || r >= '0' && r <= '9':
			b.WriteRune(r)
			up = false
		default:
			up = true
		}
	}
	return b.String()
}

func table(scope constructs.Construct, id string, t resources.Table, removal awscdk.RemovalPolicy, prod bool) awsdynamodb.Table {
	props := &awsdynamodb.TableProps{
		TableName:           jsii.String(t.Name),
		PartitionKey:        attr(t.PartitionKey),
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(t.TTLAttribute),
		RemovalPolicy:       removal,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(prod),
		},
		DeletionProtection: jsii.Bool(prod),
	}
	if t.SortKey != nil {
		props.SortKey = attr(*t.SortKey)
	}
	if t.Stream {
		// The items' new images (the events table's: webhooks are delivered
		// from it, streamSources).
		props.Stream = awsdynamodb.StreamViewType_NEW_IMAGE
	}
	tbl := awsdynamodb.NewTable(scope, jsii.String(id), props)
	for _, ix := range t.Indexes {
		gsi := &awsdynamodb.GlobalSecondaryIndexProps{IndexName: jsii.String(ix.Name), PartitionKey: attr(ix.PartitionKey), ProjectionType: awsdynamodb.ProjectionType_ALL}
		if ix.SortKey != nil {
			gsi.SortKey = attr(*ix.SortKey)
		}
		tbl.AddGlobalSecondaryIndex(gsi)
	}
	return tbl
}

func attr(k resources.Key) *awsdynamodb.Attribute {
	typ := awsdynamodb.AttributeType_STRING
	if k.Type == resources.Number {
		typ = awsdynamodb.AttributeType_NUMBER
	}
	return &awsdynamodb.Attribute{Name: jsii.String(k.Name), Type: typ}
}

func bucket(scope constructs.Construct, name string, p Props, removal awscdk.RemovalPolicy) awss3.Bucket {
	b := awss3.NewBucket(scope, jsii.String("Data"), &awss3.BucketProps{
		BucketName:        jsii.String(name),
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		Versioned:         jsii.Bool(Prod(p.Env)),
		RemovalPolicy:     removal,
		AutoDeleteObjects: jsii.Bool(!Prod(p.Env)),
		LifecycleRules: &[]*awss3.LifecycleRule{
			{Id: jsii.String("logs"), Prefix: jsii.String("logs/"), Expiration: awscdk.Duration_Days(jsii.Number(30))},
			{Id: jsii.String("session-files"), Prefix: jsii.String("sessions/"), Expiration: awscdk.Duration_Days(jsii.Number(14))},
			// A job's files go when its item does (RA_JOB_RETENTION_DAYS).
			{Id: jsii.String("job-files"), Prefix: jsii.String("jobs/"), Expiration: awscdk.Duration_Days(jsii.Number(config.DefaultJobRetentionDays))},
			{Id: jsii.String("incomplete-uploads"), AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(2))},
		},
	})
	// Env values persisted for configurations are written sealed, never in a
	// request that does not ask for SSE-S3.
	b.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("s3:PutObject"),
		Resources:  &[]*string{b.ArnForObjects(jsii.String(access.ConfigurationEnv))},
		Conditions: &map[string]any{"StringNotEquals": map[string]any{"s3:x-amz-server-side-encryption": "AES256"}},
	}))
	return b
}

// uploadsFrom lets browsers at the public origin (the embed view's) and at the
// allowed origins PUT attachments straight to their presigned URLs: the rule
// allows the headers the URLs are signed with (Content-Type; browsers set
// Content-Length themselves).
func (s *Stack) uploadsFrom(b awss3.Bucket, p Props, public *string) {
	origins := append([]*string{public}, *jsii.Strings(p.AllowedOrigins...)...)
	b.AddCorsRule(&awss3.CorsRule{
		AllowedMethods: &[]awss3.HttpMethods{awss3.HttpMethods_PUT},
		AllowedOrigins: &origins,
		AllowedHeaders: jsii.Strings("Content-Type"),
		MaxAge:         jsii.Number(routes.CORSMaxAge),
	})
}

// environment is what every function gets: where the resources are, and the
// remote_agents configuration.
func (s *Stack) environment(p Props) map[string]*string {
	set := s.Set
	env := map[string]*string{
		"RA_ENV":             jsii.String(p.Env),
		"RA_JOBS_QUEUE_URL":  s.Queues[set.JobsQueue.Name].QueueUrl(),
		"RA_JOBS_DLQ_URL":    s.Queues[set.JobsQueue.DeadLetterName].QueueUrl(),
		"RA_TOOLS_QUEUE_URL": s.Queues[set.ToolsQueue.Name].QueueUrl(),
		"RA_TOOLS_DLQ_URL":   s.Queues[set.ToolsQueue.DeadLetterName].QueueUrl(),
		// Webhook deliveries: agenttypes queues replays, the webhooks
		// function its triggers and retries, and dead-letters what failed
		// for a day. RA_WEBHOOKS_LOOPBACK stays unset (false): no endpoint
		// on loopback.
		"RA_WEBHOOKS_QUEUE_URL": s.Queues[set.WebhooksQueue.Name].QueueUrl(),
		"RA_WEBHOOKS_DLQ_URL":   s.Queues[set.WebhooksQueue.DeadLetterName].QueueUrl(),
		"RA_GUARDRAILS_PATH":    jsii.String("s3://" + set.Bucket.Name + "/" + access.GuardrailsKey),
		"RA_ALLOWED_ORIGINS":    jsii.String(strings.Join(p.AllowedOrigins, ",")),
		"RA_EMBED_FEATURES":     jsii.String(strings.Join(p.EmbedFeatures, ",")),
		// Job events reach the orchestrator here (until the bus carries them).
		"RA_ORCHESTRATOR_QUEUE_URL": s.Queues[set.OrchestratorQueue.Name].QueueUrl(),
		"RA_ORCHESTRATOR_ROLE_ARN":  s.orchestratorRole(p),
	}
	if p.CreationTimeout > 0 {
		env["RA_CREATION_TIMEOUT_SECONDS"] = jsii.String(strconv.Itoa(p.CreationTimeout))
	}
	for k, v := range p.Target.Variables() {
		env[k] = jsii.String(v)
	}
	return env
}

// orchestratorRole is the ARN of the one role the /internal/ routes take.
func (s *Stack) orchestratorRole(p Props) *string {
	if p.OrchestratorRoleARN != "" {
		return jsii.String(p.OrchestratorRoleARN)
	}
	return s.FormatArn(&awscdk.ArnComponents{Service: jsii.String("iam"), Region: jsii.String(""), Resource: jsii.String("role"),
		ResourceName: jsii.String("ra-" + p.Env + "-orchestrator"), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME})
}

// timeouts of the functions, by name; functions of streaming routes get
// streamTimeout, the rest defaultTimeout.
var timeouts = map[string]float64{
	"create":         30,
	routes.JobWorker: 270,
	ToolWorker:       720,
	"toolcallback":   30,
	// A workspace tool request waits up to 25 s for its result.
	"workspace": 30,
	// A delivery run takes at most webhook.DrainBudget (1 min) of sending
	// and one attempt (10 s) per endpoint, and a batch's triggers run one
	// after another: as long as the webhooks queue's visibility timeout
	// (5 min) allows, like jobworker on the jobs queue.
	routes.Webhooks: 270,
}

const (
	defaultTimeout = 15
	// streamTimeout is Lambda's longest: an events stream ends itself a
	// minute before (RA_EVENTS_MAX_SECONDS); a model reply streams until done.
	streamTimeout = 900
)

func (s *Stack) function(name, code string, p Props, env map[string]*string, streams bool, removal awscdk.RemovalPolicy) awslambda.Function {
	fnName := "ra-" + p.Env + "-" + name
	logs := awslogs.NewLogGroup(s.Stack, jsii.String(logicalID(name)+"Logs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/" + fnName),
		Retention:     retention(p.Env),
		RemovalPolicy: removal,
	})
	timeout, ok := timeouts[name]
	switch {
	case ok:
	case streams:
		timeout = streamTimeout
	default:
		timeout = defaultTimeout
	}
	memory := 256.0
	if name == "create" || name == ToolWorker {
		memory = 512
	}
	return awslambda.NewFunction(s.Stack, jsii.String(logicalID(name)+"Function"), &awslambda.FunctionProps{
		FunctionName: jsii.String(fnName),
		Description:  jsii.String("Remote Agents " + name + " (" + p.Env + ")"),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(p.CodeDir, code+".zip")), nil),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(timeout)),
		MemorySize:   jsii.Number(memory),
		Environment:  &env,
		LogGroup:     logs,
		Role:         s.functionRole(name, logs),
		Tracing:      awslambda.Tracing_ACTIVE,
	})
}

func retention(env string) awslogs.RetentionDays {
	if Prod(env) {
		return awslogs.RetentionDays_THREE_MONTHS
	}
	return awslogs.RetentionDays_TWO_WEEKS
}

// sandboxes is what runs sandboxes: a cluster in a VPC of public subnets (the
// agents reach their model providers; nothing reaches them), and the task.
type sandboxes struct {
	vpc        awsec2.Vpc
	cluster    awsecs.Cluster
	task       awsecs.FargateTaskDefinition
	group      awsec2.SecurityGroup
	subnets    *[]*string
	repository *string
}

func (s *Stack) sandboxes(p Props, removal awscdk.RemovalPolicy) sandboxes {
	vpc := awsec2.NewVpc(s.Stack, jsii.String("Vpc"), &awsec2.VpcProps{
		MaxAzs:      jsii.Number(2),
		NatGateways: jsii.Number(0),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{
			{Name: jsii.String("sandboxes"), SubnetType: awsec2.SubnetType_PUBLIC, CidrMask: jsii.Number(20)},
		},
	})
	group := awsec2.NewSecurityGroup(s.Stack, jsii.String("SandboxGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("Sandboxes: no inbound traffic, outbound HTTPS only"),
		AllowAllOutbound: jsii.Bool(false),
	})
	group.AddEgressRule(awsec2.Peer_AnyIpv4(), awsec2.Port_Tcp(jsii.Number(443)), jsii.String("model providers, the gateway, S3"), nil)
	// Where sandboxes connect (their agents run any code) is on record: the
	// VPC's flow log, every accepted and rejected flow.
	vpc.AddFlowLog(jsii.String("FlowLog"), &awsec2.FlowLogOptions{
		Destination: awsec2.FlowLogDestination_ToCloudWatchLogs(awslogs.NewLogGroup(s.Stack, jsii.String("VpcFlowLogs"), &awslogs.LogGroupProps{
			LogGroupName:  jsii.String("/ra/" + p.Env + "/vpc-flow-logs"),
			Retention:     retention(p.Env),
			RemovalPolicy: removal,
		}), nil),
		TrafficType: awsec2.FlowLogTrafficType_ALL,
	})
	cluster := awsecs.NewCluster(s.Stack, jsii.String("Cluster"), &awsecs.ClusterProps{
		ClusterName:         jsii.String("ra-" + p.Env + "-sandboxes"),
		Vpc:                 vpc,
		ContainerInsightsV2: awsecs.ContainerInsights_ENABLED,
		// Sandboxes run on FARGATE; a launch that fails is retried on
		// FARGATE_SPOT (RA_ECS_CAPACITY_PROVIDER, jobworker).
		EnableFargateCapacityProviders: jsii.Bool(true),
	})
	// The task role has no permissions at all: a sandbox acts only through the
	// gateway, with its own token.
	taskRole := awsiam.NewRole(s.Stack, jsii.String("SandboxTaskRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("ecs-tasks.amazonaws.com"), nil),
		Description: jsii.String("Sandboxes: no AWS permissions"),
	})
	task := awsecs.NewFargateTaskDefinition(s.Stack, jsii.String("SandboxTask"), &awsecs.FargateTaskDefinitionProps{
		Family:         jsii.String("ra-" + p.Env + "-sandbox"),
		Cpu:            jsii.Number(1024),
		MemoryLimitMiB: jsii.Number(2048),
		TaskRole:       taskRole,
		RuntimePlatform: &awsecs.RuntimePlatform{
			CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
			OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
		},
	})
	repo := awsecr.NewRepository(s.Stack, jsii.String("SandboxRepository"), &awsecr.RepositoryProps{
		RepositoryName:     jsii.String("ra-" + p.Env + "-sandbox"),
		ImageScanOnPush:    jsii.Bool(true),
		RemovalPolicy:      removal,
		EmptyOnDelete:      jsii.Bool(!Prod(p.Env)),
		ImageTagMutability: awsecr.TagMutability_MUTABLE,
	})
	var image awsecs.ContainerImage
	switch {
	case p.BuildSandboxImage:
		image = awsecs.ContainerImage_FromAsset(jsii.String(p.RepoDir), &awsecs.AssetImageProps{File: jsii.String("sandbox/Dockerfile")})
	case p.SandboxImage != "":
		image = awsecs.ContainerImage_FromRegistry(jsii.String(p.SandboxImage), nil)
	default:
		image = awsecs.ContainerImage_FromEcrRepository(repo, jsii.String("latest"))
	}
	// The model a sandbox defaults to, and nothing secret: no provider key (its
	// model calls go through the model route, which puts the key in), no token
	// (the launcher passes a one-time bootstrap code in RunTask's overrides).
	// The agent runs as root, not dumpable, and its commands as SandboxToolUser
	// (the image's user), who can neither read nor signal it.
	// Each task is a machine of its own (RA_SANDBOX_DEDICATED): without
	// Landlock, a job's bash is confined by ownership.
	environment := map[string]*string{"RA_LLM_PROVIDER": jsii.String(p.Models.Provider), "RA_TOOL_USER": jsii.String(SandboxToolUser), "RA_SANDBOX_DEDICATED": jsii.String("1")}
	if p.Models.Model != "" {
		environment["RA_LLM_MODEL"] = jsii.String(p.Models.Model)
	}
	task.AddContainer(jsii.String(SandboxContainer), &awsecs.ContainerDefinitionOptions{
		ContainerName: jsii.String(SandboxContainer),
		Image:         image,
		User:          jsii.String("0"),
		Essential:     jsii.Bool(true),
		Environment:   &environment,
		Logging: awsecs.LogDrivers_AwsLogs(&awsecs.AwsLogDriverProps{
			StreamPrefix: jsii.String("sandbox"),
			LogGroup: awslogs.NewLogGroup(s.Stack, jsii.String("SandboxTaskLogs"), &awslogs.LogGroupProps{
				LogGroupName:  jsii.String("/ra/" + p.Env + "/sandboxes"),
				Retention:     retention(p.Env),
				RemovalPolicy: removal,
			}),
		}),
	})
	var subnets []*string
	for _, sn := range *vpc.PublicSubnets() {
		subnets = append(subnets, sn.SubnetId())
	}
	return sandboxes{vpc: vpc, cluster: cluster, task: task, group: group, subnets: &subnets, repository: repo.RepositoryUri()}
}

// eventSources connects the workers to their queues, answering with partial
// batch failures: jobworker to the jobs queue, toolworker to the tools
// queue, webhooks to the webhooks queue (triggers, retries, replays).
func (s *Stack) eventSources() {
	set := s.Set
	s.Functions[routes.JobWorker].AddEventSource(awslambdaeventsources.NewSqsEventSource(s.Queues[set.JobsQueue.Name], &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
	}))
	s.Functions[ToolWorker].AddEventSource(awslambdaeventsources.NewSqsEventSource(s.Queues[set.ToolsQueue.Name], &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(1),
		ReportBatchItemFailures: jsii.Bool(true),
	}))
	s.Functions[routes.Webhooks].AddEventSource(awslambdaeventsources.NewSqsEventSource(s.Queues[set.WebhooksQueue.Name], &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
	}))
}

// Reading the events table's stream (streamSources).
const (
	// streamBatchSize is how many records an invocation takes: one
	// trigger per agent of them is queued.
	streamBatchSize = 100
	// streamRetryAttempts is how often a batch that failed is retried
	// (halved each time: bisected) before what it holds is recorded in the
	// webhooks DLQ and the stream moves on.
	streamRetryAttempts = 20
)

// streamSources connects the webhooks function to the streams its access
// reads (access.Streams: the events table's), from the newest record on:
// each batch of new events queues a trigger per agent. A batch that fails is
// retried streamRetryAttempts times, bisected, then its records' place in the
// stream is sent to the webhooks DLQ (which alarms). Only inserts reach it:
// an event is written once, and the TTL's removals are nothing to deliver.
// AWS only: the LocalStack variant's tables are the init hook's, whose
// stream the stack cannot name.
func (s *Stack) streamSources() {
	fn := s.Functions[routes.Webhooks]
	a, ok := s.access(routes.Webhooks)
	if fn == nil || !ok {
		return
	}
	for _, name := range a.Streams {
		fn.AddEventSource(awslambdaeventsources.NewDynamoEventSource(s.Tables[s.name(name)], &awslambdaeventsources.DynamoEventSourceProps{
			StartingPosition:   awslambda.StartingPosition_LATEST,
			BatchSize:          jsii.Number(streamBatchSize),
			RetryAttempts:      jsii.Number(streamRetryAttempts),
			BisectBatchOnError: jsii.Bool(true),
			OnFailure:          awslambdaeventsources.NewSqsDlq(s.Queues[s.Set.WebhooksQueue.DeadLetterName]),
			Filters: &[]*map[string]any{awslambda.FilterCriteria_Filter(&map[string]any{
				"eventName": awslambda.FilterRule_IsEqual(jsii.String("INSERT")),
			})},
		}))
	}
}

func (s *Stack) alarms() {
	alarm := func(id string, metric awscloudwatch.IMetric, threshold float64, what string) {
		awscloudwatch.NewAlarm(s.Stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          jsii.String("ra-" + s.Set.Env + "-" + strings.ToLower(id)),
			AlarmDescription:   jsii.String(what),
			Metric:             metric,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
	}
	for _, q := range s.Set.Queues() {
		alarm(s.id(q.DeadLetterName, "Depth"), s.Queues[q.DeadLetterName].MetricApproximateNumberOfMessagesVisible(nil), 1, "Messages in "+q.DeadLetterName)
	}
	for _, name := range append(s.FunctionNames(), ToolWorker) {
		fn := s.Functions[name]
		alarm(logicalID(name)+"Errors", fn.MetricErrors(nil), 5, name+" errors")
		alarm(logicalID(name)+"Throttles", fn.MetricThrottles(nil), 1, name+" throttles")
	}
	// The platform's own metrics (package metrics: embedded metric format
	// lines of the functions' logs), in aggregate.
	platform := func(name, stat string, period awscdk.Duration) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(metrics.Namespace), MetricName: jsii.String(name),
			Statistic: jsii.String(stat), Period: period})
	}
	alarm("DailyModelCost", platform(metrics.ModelCostUSD, "Sum", awscdk.Duration_Days(jsii.Number(1))), s.dailyCostAlarmUSD,
		fmt.Sprintf("Model calls cost %.0f USD or more in a day (RemoteAgents ModelCostUSD; by app: dimension Tenant)", s.dailyCostAlarmUSD))
	for _, at := range []float64{80, 100} {
		alarm(fmt.Sprintf("AppBudget%.0fPercent", at), platform(metrics.BudgetUsedPercent, "Maximum", awscdk.Duration_Minutes(jsii.Number(5))), at,
			fmt.Sprintf("An app's model spend reached %.0f%% of its day's or month's cap (RemoteAgents BudgetUsedPercent; which app: dimension Tenant)", at))
	}
	alarm("SessionsAtMaxDuration", platform(metrics.SessionsAtMaxDuration, "Sum", awscdk.Duration_Minutes(jsii.Number(5))), 1,
		"Sessions ran to their maximum time and were ended for it (RemoteAgents SessionsAtMaxDuration)")
}
