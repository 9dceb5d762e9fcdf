package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Platform is everything a platform process (a Lambda function, the dev
// server) is configured with: the remote_agents section and the settings of
// its deployment. It is read once at start (Load) and passed down; nothing
// else reads RA_* (or WORKSPACE_DEFAULT_*) variables.
type Platform struct {
	RemoteAgents
	// Env names the environment's resources (RA_ENV, default "dev").
	Env string
	// Queues are the queues' URLs; an empty one is looked up by name.
	Queues Queues
	// WebhooksLoopback lets webhook deliveries reach loopback addresses
	// (RA_WEBHOOKS_LOOPBACK=true; make dev sets it): receivers on the
	// same machine. Private, link-local and metadata addresses stay
	// refused.
	WebhooksLoopback bool
	// GatewayURL is where sandboxes reach the platform (RA_GATEWAY_URL,
	// default PublicBaseURL).
	GatewayURL string
	// EventsMaxDuration ends an events stream, before its function's timeout
	// (RA_EVENTS_MAX_SECONDS, default 840).
	EventsMaxDuration time.Duration
	// JobRetentionDays is how long a finished job, its events and its
	// files are kept (RA_JOB_RETENTION_DAYS, default 30).
	JobRetentionDays int
	// Fargate says where sandbox tasks run (RA_ECS_*).
	Fargate Fargate
	// Model configures the model gateway (RA_MODEL_*).
	Model Model
	// Push is the push channel to sandboxes (RA_PUSH_*).
	Push Push
	// OrchestratorRoleARN is the only caller of the /internal/ routes (the
	// orchestrator's IAM role; RA_ORCHESTRATOR_ROLE_ARN, on the dev stack
	// DevOrchestratorRoleARN).
	OrchestratorRoleARN string
	// OrchestratorQueue is the URL of the queue job events reach the
	// orchestrator on (RA_ORCHESTRATOR_QUEUE_URL; looked up by name if "").
	OrchestratorQueue string
	// EgressProxy is the egress proxy service's own (RA_EGRESS_*).
	EgressProxy EgressProxy
	// E2B is the sandbox API's (RA_E2B_*).
	E2B E2B
	// SandboxProxy is the sandbox proxy service's own (RA_SANDBOX_PROXY_*).
	SandboxProxy SandboxProxy
}

// SandboxProxy configures the sandbox proxy service (services/sandboxproxy):
// on AWS, what reaches sandboxes' envd and ports from the internet, behind a
// load balancer.
type SandboxProxy struct {
	// Addr is where it serves the sandboxes (RA_SANDBOX_PROXY_ADDR,
	// default ":8080").
	Addr string
	// HealthAddr is where it answers its load balancer's health checks
	// (RA_SANDBOX_PROXY_HEALTH_ADDR, default ":8081"): a listener of its
	// own, since every path of Addr is a sandbox's (envd answers GET
	// /health itself).
	HealthAddr string
}

// Where the sandbox proxy service listens by default.
const (
	DefaultSandboxProxyAddr       = ":8080"
	DefaultSandboxProxyHealthAddr = ":8081"
)

// SandboxProxyIdleTimeout is how long the sandbox proxy's load balancer
// keeps a connection on which nothing moves (the stack's): a stream of
// envd's (a command's output, a watch) may be silent that long.
const SandboxProxyIdleTimeout = time.Hour

// E2B configures the sandbox API (the E2B-compatible control plane) and
// the sandbox proxy.
type E2B struct {
	// TokenSecret names the Secrets Manager secret envd access tokens are
	// derived from (RA_E2B_TOKEN_SECRET); "": a random key per process.
	TokenSecret string
	// Domain is the sandbox domain answered to the SDKs (RA_E2B_DOMAIN);
	// "": theirs.
	Domain string
}

// EgressProxy configures the egress proxy service (services/egressproxy).
type EgressProxy struct {
	// Addr is where it listens (RA_EGRESS_PROXY_ADDR, default ":3128").
	Addr string
	// CASecret names the Secrets Manager secret its replicas derive every
	// sandbox's authority from (RA_EGRESS_CA_SECRET); "": random
	// authorities, one replica only.
	CASecret string
}

// DefaultEgressProxyAddr is where the egress proxy service listens.
const DefaultEgressProxyAddr = ":3128"

// Push is the push channel: one WebSocket connection per sandbox, which the
// platform posts inbox wakes to. Without a URL, sandboxes only poll their
// inbox; without an endpoint, the platform pushes nothing.
type Push struct {
	// URL is where sandboxes connect (RA_PUSH_URL, ws:// or wss://): on AWS
	// the WebSocket API's stage URL.
	URL string
	// Endpoint is the @connections API the platform posts to
	// (RA_PUSH_ENDPOINT, https://{api-id}.execute-api.{region}.amazonaws.com/{stage}).
	Endpoint string
}

// DevOrchestratorRoleARN is the orchestrator's role on the dev stack, whose
// signed calls the dev server lets through as this caller.
const DevOrchestratorRoleARN = "arn:aws:iam::000000000000:role/ra-dev-orchestrator"

// Queues are the URLs of the jobs, tools and webhooks queues and their
// dead-letter queues (RA_JOBS_QUEUE_URL, RA_JOBS_DLQ_URL, RA_TOOLS_QUEUE_URL,
// RA_TOOLS_DLQ_URL, RA_WEBHOOKS_QUEUE_URL, RA_WEBHOOKS_DLQ_URL).
type Queues struct {
	Jobs, JobsDLQ, Tools, ToolsDLQ, Webhooks, WebhooksDLQ string
}

// Fargate says where and how sandbox tasks run.
type Fargate struct {
	Cluster        string   // RA_ECS_CLUSTER
	TaskDefinition string   // RA_ECS_TASK_DEFINITION
	Container      string   // RA_ECS_CONTAINER, default "agent"
	Subnets        []string // RA_ECS_SUBNETS, comma-separated
	SecurityGroups []string // RA_ECS_SECURITY_GROUPS, comma-separated
	// IsolatedSecurityGroups are the security groups of sandboxes cut off
	// from the network (RA_ECS_ISOLATED_SECURITY_GROUPS): they reach the
	// egress proxy only, at EgressProxyURL (RA_EGRESS_PROXY_URL).
	IsolatedSecurityGroups []string
	EgressProxyURL         string
	AssignPublicIP         bool   // RA_ECS_ASSIGN_PUBLIC_IP=true
	CPU                    string // RA_ECS_CPU: overrides the task definition's
	Memory                 string // RA_ECS_MEMORY: overrides the task definition's
	// CapacityProvider is where sandbox tasks run first, FARGATE or
	// FARGATE_SPOT, the other one being where a failed launch is retried
	// (RA_ECS_CAPACITY_PROVIDER; "" the FARGATE launch type, retried as is).
	CapacityProvider string
}

// DefaultEventsMaxDuration ends an events stream a minute before the events
// function's 15-minute timeout.
const DefaultEventsMaxDuration = 840 * time.Second

// DefaultJobRetentionDays is how long a finished job is kept: its item and
// events in DynamoDB (TTL) and its files in the bucket (the stack's
// lifecycle rule on jobs/, which reads the same constant).
const DefaultJobRetentionDays = 30

// PlatformDefaults returns the defaults of every platform setting.
func PlatformDefaults() Platform {
	return Platform{
		RemoteAgents:      Defaults(),
		Env:               "dev",
		EventsMaxDuration: DefaultEventsMaxDuration,
		JobRetentionDays:  DefaultJobRetentionDays,
		Fargate:           Fargate{Container: "agent"},
		EgressProxy:       EgressProxy{Addr: DefaultEgressProxyAddr},
		SandboxProxy:      SandboxProxy{Addr: DefaultSandboxProxyAddr, HealthAddr: DefaultSandboxProxyHealthAddr},
		Model: Model{
			Providers: slices.Clone(sandboxwire.ModelProviders),
			Secrets:   map[string]string{},
			Upstreams: map[string]string{},
		},
	}
}

// envVars are the variables of the platform's environment Parse reads: the
// rows of the one table of variables (Variables) that set a field. A blank
// value keeps the default, but for the lists where empty is a value (no
// origins, no features, no model providers).
var envVars = platformVars()

// platformVars are the rows of Variables that Parse reads: those with a
// setter, in the table's order.
func platformVars() []Variable {
	var vars []Variable
	for _, v := range Variables {
		if v.set != nil {
			vars = append(vars, v)
		}
	}
	return vars
}

// limitVar sets the session limit field returns from the variable name.
func limitVar(name string, field func(*Platform) *int) func(*Platform, string) error {
	return func(p *Platform, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s: want a whole number of seconds, got %q", name, v)
		}
		*field(p), err = LimitSeconds(name, n)
		return err
	}
}

// costVar sets the cost bound field returns from the variable name.
func costVar(name string, field func(*Platform) *float64) func(*Platform, string) error {
	return func(p *Platform, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s: want a number of USD, got %q", name, v)
		}
		*field(p), err = CostUSD(name, f)
		return err
	}
}

// quotaVar sets the quota field returns from the variable name.
func quotaVar(name string, field func(*Platform) *int) func(*Platform, string) error {
	return func(p *Platform, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s: want a whole number, got %q", name, v)
		}
		*field(p), err = Quota(name, n)
		return err
	}
}

// applyEnv applies the environment's variables, then the defaults that follow
// from others.
func (p *Platform) applyEnv(lookup func(string) (string, bool)) error {
	for _, e := range envVars {
		v, ok := lookup(e.Name)
		if v = strings.TrimSpace(v); !ok || (v == "" && !e.emptyIsValue) {
			continue
		}
		if err := e.set(p, v); err != nil {
			return err
		}
	}
	// The workspace defaults, from the file and the variables together, are
	// one size a Fargate task can have.
	if err := p.WorkspaceDefaults.check("workspace defaults (WORKSPACE_DEFAULT_CPU, WORKSPACE_DEFAULT_MEMORY, WORKSPACE_DEFAULT_DISK)"); err != nil {
		return err
	}
	if p.GatewayURL == "" {
		p.GatewayURL = strings.TrimRight(p.PublicBaseURL, "/")
	}
	if p.Model.GatewayURL == "" {
		p.Model.GatewayURL = p.GatewayURL
	}
	return nil
}
