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
	// GatewayURL is where sandboxes reach the platform (RA_GATEWAY_URL,
	// default PublicBaseURL).
	GatewayURL string
	// EventsMaxDuration ends an events stream, before its function's timeout
	// (RA_EVENTS_MAX_SECONDS, default 840).
	EventsMaxDuration time.Duration
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
}

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

// Queues are the URLs of the jobs and tools queues and their dead-letter queues
// (RA_JOBS_QUEUE_URL, RA_JOBS_DLQ_URL, RA_TOOLS_QUEUE_URL, RA_TOOLS_DLQ_URL).
type Queues struct {
	Jobs, JobsDLQ, Tools, ToolsDLQ string
}

// Fargate says where and how sandbox tasks run.
type Fargate struct {
	Cluster        string   // RA_ECS_CLUSTER
	TaskDefinition string   // RA_ECS_TASK_DEFINITION
	Container      string   // RA_ECS_CONTAINER, default "agent"
	Subnets        []string // RA_ECS_SUBNETS, comma-separated
	SecurityGroups []string // RA_ECS_SECURITY_GROUPS, comma-separated
	AssignPublicIP bool     // RA_ECS_ASSIGN_PUBLIC_IP=true
	CPU            string   // RA_ECS_CPU: overrides the task definition's
	Memory         string   // RA_ECS_MEMORY: overrides the task definition's
	// CapacityProvider is where sandbox tasks run first, FARGATE or
	// FARGATE_SPOT, the other one being where a failed launch is retried
	// (RA_ECS_CAPACITY_PROVIDER; "" the FARGATE launch type, retried as is).
	CapacityProvider string
}

// DefaultEventsMaxDuration ends an events stream a minute before the events
// function's 15-minute timeout.
const DefaultEventsMaxDuration = 840 * time.Second

// PlatformDefaults returns the defaults of every platform setting.
func PlatformDefaults() Platform {
	return Platform{
		RemoteAgents:      Defaults(),
		Env:               "dev",
		EventsMaxDuration: DefaultEventsMaxDuration,
		Fargate:           Fargate{Container: "agent"},
		Model: Model{
			Providers: slices.Clone(sandboxwire.ModelProviders),
			Secrets:   map[string]string{},
			Upstreams: map[string]string{},
		},
	}
}

// envVar is one variable of the platform's environment: it sets one field.
type envVar struct {
	name         string
	emptyIsValue bool
	set          func(p *Platform, v string) error
}

// envVars is the one table of the platform's environment variables: each
// sets one field. A blank value keeps the default, but for the lists where
// empty is a value (no origins, no features, no model providers).
var envVars = append([]envVar{
	// The remote_agents section's overrides.
	{"RA_ALLOWED_ORIGINS", true, func(p *Platform, v string) (err error) {
		p.AllowedOrigins, err = Origins("RA_ALLOWED_ORIGINS", splitList(v))
		return err
	}},
	{"RA_EMBED_FEATURES", true, func(p *Platform, v string) error {
		p.EmbedFeatures = Features{}
		for _, f := range splitList(v) {
			field, known := featureNames[f]
			if !known {
				return fmt.Errorf("RA_EMBED_FEATURES: unknown feature %q (want file_upload, context_usage, voice_mic)", f)
			}
			*field(&p.EmbedFeatures) = true
		}
		return nil
	}},
	{"RA_CREATION_TIMEOUT_SECONDS", false, func(p *Platform, v string) error {
		secs, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("RA_CREATION_TIMEOUT_SECONDS: want a whole number of seconds, got %q", v)
		}
		p.CreationTimeout, err = timeout("RA_CREATION_TIMEOUT_SECONDS", secs)
		return err
	}},
	{"RA_PUBLIC_BASE_URL", false, func(p *Platform, v string) error {
		p.PublicBaseURL = v
		return checkBaseURL("RA_PUBLIC_BASE_URL", v)
	}},
	{"RA_GUARDRAILS_PATH", false, func(p *Platform, v string) error { p.GuardrailsPath = v; return nil }},
	{"RA_EXCEPTION_WEBHOOK_URL", false, func(p *Platform, v string) error {
		p.ExceptionWebhookURL = v
		return checkBaseURL("RA_EXCEPTION_WEBHOOK_URL", v)
	}},
	{"RA_GIT_INSECURE_HOSTS", true, func(p *Platform, v string) (err error) {
		p.GitInsecureHosts, err = insecureHosts("RA_GIT_INSECURE_HOSTS", splitList(v))
		return err
	}},
	{"RA_MAX_SESSION_SECONDS", false, limitVar("RA_MAX_SESSION_SECONDS", func(p *Platform) *int { return &p.SessionLimits.MaxSessionSeconds })},
	{"RA_IDLE_TIMEOUT_SECONDS", false, limitVar("RA_IDLE_TIMEOUT_SECONDS", func(p *Platform) *int { return &p.SessionLimits.IdleTimeoutSeconds })},
	{"RA_MAX_SESSION_TOKENS", false, func(p *Platform, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("RA_MAX_SESSION_TOKENS: want 0 (none) or a positive whole number, got %q", v)
		}
		p.SessionLimits.MaxTokens = n
		return nil
	}},
	{"RA_MAX_SESSION_COST_USD", false, costVar("RA_MAX_SESSION_COST_USD", func(p *Platform) *float64 { return &p.SessionLimits.MaxCostUSD })},
	{"RA_MAX_COST_USD_PER_DAY", false, costVar("RA_MAX_COST_USD_PER_DAY", func(p *Platform) *float64 { return &p.SessionLimits.MaxCostUSDPerDay })},
	{"RA_PRICE_TABLE", false, func(p *Platform, v string) error { p.SessionLimits.PriceTablePath = v; return nil }},
	{"RA_QUOTA_CONCURRENT_SESSIONS", false, quotaVar("RA_QUOTA_CONCURRENT_SESSIONS", func(p *Platform) *int { return &p.Quotas.ConcurrentSessions })},
	{"RA_QUOTA_CREATES_PER_MINUTE", false, quotaVar("RA_QUOTA_CREATES_PER_MINUTE", func(p *Platform) *int { return &p.Quotas.CreatesPerMinute })},
	{"RA_QUOTA_STREAMS_PER_SESSION", false, quotaVar("RA_QUOTA_STREAMS_PER_SESSION", func(p *Platform) *int { return &p.Quotas.StreamsPerSession })},
	{"WORKSPACE_DEFAULT_CPU", false, func(p *Platform, v string) error { p.WorkspaceDefaults.CPU = v; return nil }},
	{"WORKSPACE_DEFAULT_MEMORY", false, func(p *Platform, v string) error { p.WorkspaceDefaults.Memory = v; return nil }},
	{"WORKSPACE_DEFAULT_DISK", false, func(p *Platform, v string) error { p.WorkspaceDefaults.Disk = v; return nil }},
	// The deployment's settings.
	{"RA_ENV", false, func(p *Platform, v string) error { p.Env = v; return nil }},
	{"RA_JOBS_QUEUE_URL", false, func(p *Platform, v string) error { p.Queues.Jobs = v; return nil }},
	{"RA_JOBS_DLQ_URL", false, func(p *Platform, v string) error { p.Queues.JobsDLQ = v; return nil }},
	{"RA_TOOLS_QUEUE_URL", false, func(p *Platform, v string) error { p.Queues.Tools = v; return nil }},
	{"RA_TOOLS_DLQ_URL", false, func(p *Platform, v string) error { p.Queues.ToolsDLQ = v; return nil }},
	{"RA_ORCHESTRATOR_ROLE_ARN", false, func(p *Platform, v string) error { p.OrchestratorRoleARN = strings.TrimSpace(v); return nil }},
	{"RA_ORCHESTRATOR_QUEUE_URL", false, func(p *Platform, v string) error { p.OrchestratorQueue = v; return nil }},
	{"RA_GATEWAY_URL", false, func(p *Platform, v string) error {
		p.GatewayURL = strings.TrimRight(v, "/")
		return checkBaseURL("RA_GATEWAY_URL", v)
	}},
	{"RA_PUSH_URL", false, func(p *Platform, v string) error {
		if !strings.HasPrefix(v, "ws://") && !strings.HasPrefix(v, "wss://") {
			return fmt.Errorf("RA_PUSH_URL: want a ws:// or wss:// URL, got %q", v)
		}
		p.Push.URL = v
		return nil
	}},
	{"RA_PUSH_ENDPOINT", false, func(p *Platform, v string) error {
		p.Push.Endpoint = strings.TrimRight(v, "/")
		return checkBaseURL("RA_PUSH_ENDPOINT", v)
	}},
	{"RA_EVENTS_MAX_SECONDS", false, func(p *Platform, v string) error {
		secs, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || secs <= 0 {
			return fmt.Errorf("RA_EVENTS_MAX_SECONDS: want a positive whole number of seconds, got %q", v)
		}
		p.EventsMaxDuration = time.Duration(secs) * time.Second
		return nil
	}},
	{"RA_ECS_CLUSTER", false, func(p *Platform, v string) error { p.Fargate.Cluster = v; return nil }},
	{"RA_ECS_TASK_DEFINITION", false, func(p *Platform, v string) error { p.Fargate.TaskDefinition = v; return nil }},
	{"RA_ECS_CONTAINER", false, func(p *Platform, v string) error { p.Fargate.Container = v; return nil }},
	{"RA_ECS_SUBNETS", false, func(p *Platform, v string) error { p.Fargate.Subnets = splitList(v); return nil }},
	{"RA_ECS_SECURITY_GROUPS", false, func(p *Platform, v string) error { p.Fargate.SecurityGroups = splitList(v); return nil }},
	{"RA_ECS_ASSIGN_PUBLIC_IP", false, func(p *Platform, v string) error { p.Fargate.AssignPublicIP = v == "true"; return nil }},
	{"RA_ECS_CPU", false, func(p *Platform, v string) error { p.Fargate.CPU = v; return nil }},
	{"RA_ECS_MEMORY", false, func(p *Platform, v string) error { p.Fargate.Memory = v; return nil }},
	{"RA_ECS_CAPACITY_PROVIDER", false, func(p *Platform, v string) error {
		if v != "FARGATE" && v != "FARGATE_SPOT" {
			return fmt.Errorf("RA_ECS_CAPACITY_PROVIDER: want FARGATE or FARGATE_SPOT, got %q", v)
		}
		p.Fargate.CapacityProvider = v
		return nil
	}},
}, modelEnvVars()...)

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
		v, ok := lookup(e.name)
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
