package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Variables is the one table of the system's environment variables: every
// RA_* variable the code reads or sets, and the few others it reads under a
// contract's name. docs/configuration.md is generated from it (Markdown), and
// the repository's tests fail when the code names an RA_* variable it lacks
// or it lists one no code names. Parse reads the platform's rows, those with
// a setter (set), so each of its variables is named once; shared/config's own
// tests check that every platform row has one and that the defaults are
// those documented here.
var Variables = []Variable{
	{Name: "RA_PORT", Readers: []Reader{DevServer}, Default: "`8080`",
		Meaning: "port of the API on 127.0.0.1"},
	{Name: "RA_DEV_APP_KEY", Readers: []Reader{DevServer, Tooling}, Default: "`ra_dev_app_key`",
		Meaning: "the app key the dev server registers (`Authorization: Bearer …` on `create`)"},
	{Name: "RA_DEV_E2B_KEY", Readers: []Reader{DevServer, Tooling}, Default: "`e2b_00000000000000000000000000000000000de7e1`",
		Meaning: "the E2B API key the dev server registers beside the app key (an app key of the same tenant, shaped as the E2B SDKs require): `E2B_API_KEY` for the sandbox API at `http://127.0.0.1:$RA_PORT/e2b` (docs/e2b.md)"},
	{Name: "RA_E2B_SANDBOX_PORT", Readers: []Reader{DevServer}, Default: "`49983`",
		Meaning: "port of the sandbox proxy on 127.0.0.1, every sandbox's envd behind it: `E2B_SANDBOX_URL=http://127.0.0.1:$RA_E2B_SANDBOX_PORT` (docs/e2b.md)"},
	{Name: "RA_AGENT_BIN", Readers: []Reader{DevServer, Tooling}, Default: "`dist/agent`",
		Meaning: "the agent binary each sandbox runs (`<bin> sandbox`); the end-to-end tests' too (`make test` passes an agent it builds with `-race`, `.cache/bin/agent-race`; `make bench` passes `dist/agent`; unset, the tests build their own)"},
	{Name: "RA_SANDBOX_COMMAND", Readers: []Reader{DevServer}, Default: "the agent binary",
		Meaning: "a command run by `/bin/sh -c` as each sandbox instead of the agent binary"},
	{Name: "RA_SANDBOX_PROFILE", Readers: []Reader{DevServer}, Default: "unset: the dev server's own rights",
		Meaning: "`fargate` runs each sandbox as a Fargate task runs its container: root with Docker's default capabilities only (no `CAP_SYS_ADMIN`, no `CAP_NET_ADMIN`), `no_new_privs` (through util-linux's `setpriv`); see docs/local.md"},
	{Name: "RA_TEST_SANDBOX_PROFILE", Readers: []Reader{Tooling}, Default: "unset: the dev server's own rights",
		Meaning: "the sandbox profile of every stack an end-to-end test starts without one of its own (`make test-fargate` sets `fargate`; see `RA_SANDBOX_PROFILE`)"},
	{Name: "RA_SANDBOX_ROOTFS", Readers: []Reader{DevServer}, Default: "unset: the host's",
		Meaning: "the root filesystem of the sandbox image (`.cache/image/rootfs` after `make image`): each sandbox runs the image's agent chrooted into it, its folders bound in (root only; see docs/local.md)"},
	{Name: "RA_SANDBOX_CGROUP", Readers: []Reader{DevServer}, Default: "its own cgroup, where writable v2",
		Meaning: "a delegated cgroup v2 directory the dev server creates each sandbox's cgroup in (`memory.max`, `cpu.max`)"},
	{Name: "RA_WORK_DIR", Readers: []Reader{DevServer}, Default: "`.cache/dev`",
		Meaning: "where sandboxes get their workspaces (removed when each ends) and logs (`sandboxes/`)"},
	{Name: "RA_DEV_ORCHESTRATOR_KEY_ID", Readers: []Reader{DevServer}, Default: "`AKIDRADEVORCHESTRATOR`",
		Meaning: "access key id of the dev orchestrator, whose SigV4 signatures the `/internal/` routes take"},
	{Name: "RA_DEV_ORCHESTRATOR_SECRET", Readers: []Reader{DevServer}, Default: "`ra-dev-orchestrator-secret`",
		Meaning: "its secret"},
	{Name: "RA_CONFIG", Readers: []Reader{PlatformFunctions, DevServer}, Default: "`config.yaml` if present",
		Meaning: "the YAML file with the `remote_agents` section; it must exist when named"},
	{Name: "RA_ENV", Readers: []Reader{PlatformFunctions, DevServer, Tooling}, Value: "dev", Default: "`dev`",
		Meaning: "the environment, in every resource's name (`ra-<env>-…`)",
		set:     func(p *Platform, v string) error { p.Env = v; return nil }},
	{Name: "RA_ALLOWED_ORIGINS", Readers: []Reader{PlatformFunctions}, Default: "none",
		Meaning:      "comma-separated origins that may frame the embed view and call the API from a browser (CORS: preflights of the `/api/remote_agents/*` routes are answered for these origins, with `Authorization`, `Content-Type`, `Idempotency-Key`, `Last-Event-ID`, `X-Session-Token` allowed and `Retry-After`, `Idempotent-Replayed` exposed)",
		emptyIsValue: true,
		set: func(p *Platform, v string) (err error) {
			p.AllowedOrigins, err = Origins("RA_ALLOWED_ORIGINS", splitList(v))
			return err
		}},
	{Name: "RA_EMBED_FEATURES", Readers: []Reader{PlatformFunctions}, Default: "none",
		Meaning:      "comma-separated embed view features a session has unless `create` says otherwise: `file_upload`, `context_usage`, `voice_mic`",
		emptyIsValue: true,
		set: func(p *Platform, v string) error {
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
	{Name: "RA_CREATION_TIMEOUT_SECONDS", Readers: []Reader{PlatformFunctions}, Value: "15", Default: "`15`",
		Meaning: "how long `create` waits for the agent to be ready (1..29: API Gateway stops at 30 s)",
		set: func(p *Platform, v string) error {
			secs, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("RA_CREATION_TIMEOUT_SECONDS: want a whole number of seconds, got %q", v)
			}
			p.CreationTimeout, err = timeout("RA_CREATION_TIMEOUT_SECONDS", secs)
			return err
		}},
	{Name: "RA_PUBLIC_BASE_URL", Readers: []Reader{PlatformFunctions}, Default: "none; the dev server's own address",
		Meaning: "the platform's public address, which prefixes the `embed_url`s it hands out",
		set: func(p *Platform, v string) error {
			p.PublicBaseURL = v
			return checkBaseURL("RA_PUBLIC_BASE_URL", v)
		}},
	{Name: "RA_GUARDRAILS_PATH", Readers: []Reader{PlatformFunctions, Tooling}, Value: "data/platform-guardrails.md", Default: "`data/platform-guardrails.md`",
		Meaning: "the platform guardrails document: a file or `s3://bucket/key`",
		set:     func(p *Platform, v string) error { p.GuardrailsPath = v; return nil }},
	{Name: "RA_EXCEPTION_WEBHOOK_URL", Readers: []Reader{PlatformFunctions}, Default: "none",
		Meaning: "exception reports are POSTed here too",
		set: func(p *Platform, v string) error {
			p.ExceptionWebhookURL = v
			return checkBaseURL("RA_EXCEPTION_WEBHOOK_URL", v)
		}},
	{Name: "WORKSPACE_DEFAULT_CPU", Readers: []Reader{PlatformFunctions}, Value: "1", Default: "`1`",
		Meaning: "the vCPUs of a workspace whose agent type sets none (`0.25` … `16`)",
		set:     func(p *Platform, v string) error { p.WorkspaceDefaults.CPU = v; return nil }},
	{Name: "WORKSPACE_DEFAULT_MEMORY", Readers: []Reader{PlatformFunctions}, Value: "2G", Default: "`2G`",
		Meaning: "its memory; with the CPU, a pair Fargate allows (see docs/agent-types.md)",
		set:     func(p *Platform, v string) error { p.WorkspaceDefaults.Memory = v; return nil }},
	{Name: "WORKSPACE_DEFAULT_DISK", Readers: []Reader{PlatformFunctions}, Value: "20G", Default: "`20G`",
		Meaning: "its disk, 20G to 200G",
		set:     func(p *Platform, v string) error { p.WorkspaceDefaults.Disk = v; return nil }},
	{Name: "RA_MAX_SESSION_SECONDS", Readers: []Reader{PlatformFunctions}, Value: "86400", Default: "`86400`",
		Meaning: "the longest a session lives; then its sandbox is told to stop and it ends with reason `max_duration` (0: no bound)",
		set:     limitVar("RA_MAX_SESSION_SECONDS", func(p *Platform) *int { return &p.SessionLimits.MaxSessionSeconds })},
	{Name: "RA_IDLE_TIMEOUT_SECONDS", Readers: []Reader{PlatformFunctions}, Value: "3600", Default: "`3600`",
		Meaning: "how long a session may be idle: no event (message, tool call), no model call, no busy heartbeat (a turn or a tool running), no open event stream; then it ends with reason `idle_timeout` (0: no bound)",
		set:     limitVar("RA_IDLE_TIMEOUT_SECONDS", func(p *Platform) *int { return &p.SessionLimits.IdleTimeoutSeconds })},
	{Name: "RA_MAX_SESSION_TOKENS", Readers: []Reader{PlatformFunctions}, Value: "0", Default: "`0`",
		Meaning: "the model tokens (input + output, as the model gateway meters them) a session may use; then it ends with reason `token_budget` (0: no bound)",
		set: func(p *Platform, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("RA_MAX_SESSION_TOKENS: want 0 (none) or a positive whole number, got %q", v)
			}
			p.SessionLimits.MaxTokens = n
			return nil
		}},
	{Name: "RA_MAX_SESSION_COST_USD", Readers: []Reader{PlatformFunctions}, Value: "0", Default: "`0`",
		Meaning: "what a session's model calls may cost (by the price table); then it ends with reason `cost_budget` (0: no bound)",
		set:     costVar("RA_MAX_SESSION_COST_USD", func(p *Platform) *float64 { return &p.SessionLimits.MaxCostUSD })},
	{Name: "RA_MAX_COST_USD_PER_DAY", Readers: []Reader{PlatformFunctions}, Value: "0", Default: "`0`",
		Meaning: "an app's model spend a UTC day, held at the model gateway: no call starts past it (each call holds its most before it starts), the agents that call are told (`budget.exceeded`) and end (`budget`), and create answers 429 `budget_exceeded` until the next day (0: no bound)",
		set:     costVar("RA_MAX_COST_USD_PER_DAY", func(p *Platform) *float64 { return &p.SessionLimits.MaxCostUSDPerDay })},
	{Name: "RA_MAX_COST_USD_PER_MONTH", Readers: []Reader{PlatformFunctions}, Value: "0", Default: "`0`",
		Meaning: "an app's model spend a UTC month, held at the model gateway as the day's is (0: no bound)",
		set:     costVar("RA_MAX_COST_USD_PER_MONTH", func(p *Platform) *float64 { return &p.SessionLimits.MaxCostUSDPerMonth })},
	{Name: "RA_PRICE_TABLE", Readers: []Reader{PlatformFunctions}, Default: "the shipped `data/model-prices.json`",
		Meaning: "the price table model calls are costed by: JSON `{\"models\": {\"<model id prefix>\": {\"input\": …, \"output\": …, \"cached_input\": …}}}` in USD per million tokens",
		set:     func(p *Platform, v string) error { p.SessionLimits.PriceTablePath = v; return nil }},
	{Name: "RA_QUOTA_CONCURRENT_SESSIONS", Readers: []Reader{PlatformFunctions}, Value: "100", Default: "`100`",
		Meaning: "live agents one app (tenant) may hold, exactly: a counter each create takes from in its own write and each end gives back to; one more create is 429 `quota_exceeded` (`details.quota` `concurrent_sessions`, retry after 30 s)",
		set:     quotaVar("RA_QUOTA_CONCURRENT_SESSIONS", func(p *Platform) *int { return &p.Quotas.ConcurrentSessions })},
	{Name: "RA_QUOTA_CREATES_PER_MINUTE", Readers: []Reader{PlatformFunctions}, Value: "60", Default: "`60`",
		Meaning: "creates one app may make in a clock minute; past it, 429 `quota_exceeded` with the seconds to the next minute",
		set:     quotaVar("RA_QUOTA_CREATES_PER_MINUTE", func(p *Platform) *int { return &p.Quotas.CreatesPerMinute })},
	{Name: "RA_QUOTA_STREAMS_PER_SESSION", Readers: []Reader{PlatformFunctions}, Value: "10", Default: "`10`",
		Meaning: "event streams one agent may have open, and viewers it may have on the push channel (the embed view's), each; one more is 429 `quota_exceeded` until one closes",
		set:     quotaVar("RA_QUOTA_STREAMS_PER_SESSION", func(p *Platform) *int { return &p.Quotas.StreamsPerSession })},
	{Name: "RA_QUOTA_UPLOADS_PER_SESSION", Readers: []Reader{PlatformFunctions}, Value: "1000", Default: "`1000`",
		Meaning: "presigned upload URLs one agent is granted over its life (the embed view's attachments and its tools' files: evidence, snapshots, job outputs); one more is 429 `quota_exceeded`",
		set:     quotaVar("RA_QUOTA_UPLOADS_PER_SESSION", func(p *Platform) *int { return &p.Quotas.UploadsPerSession })},
	{Name: "RA_QUOTA_UPLOAD_GIB_PER_SESSION", Readers: []Reader{PlatformFunctions}, Value: "50", Default: "`50`",
		Meaning: "the GiB those upload URLs may carry together, each counted at the size it was granted for; past it, 429 `quota_exceeded`",
		set:     quotaVar("RA_QUOTA_UPLOAD_GIB_PER_SESSION", func(p *Platform) *int { return &p.Quotas.UploadGiBPerSession })},
	{Name: "RA_QUOTA_AGENT_TYPES", Readers: []Reader{PlatformFunctions}, Value: "100", Default: "`100`",
		Meaning: "agent types one app may keep; one more create is 429 `quota_exceeded` (`details.quota` `agent_types`)",
		set:     quotaVar("RA_QUOTA_AGENT_TYPES", func(p *Platform) *int { return &p.Quotas.AgentTypes })},
	{Name: "RA_QUOTA_WARM_SANDBOXES", Readers: []Reader{PlatformFunctions}, Value: "0", Default: "`0`",
		Meaning: "warm pool sandboxes one app's agent types may keep together (the sum of their `warm_pool_size`; 0: as many as the live quota); a type's create or workspace change past it is 429 `quota_exceeded` (`details.quota` `warm_sandboxes`): an app holds at most its live quota in agents and this many idle sandboxes",
		set: func(p *Platform, v string) error {
			if v == "0" {
				p.Quotas.WarmSandboxes = 0
				return nil
			}
			return quotaVar("RA_QUOTA_WARM_SANDBOXES", func(p *Platform) *int { return &p.Quotas.WarmSandboxes })(p, v)
		}},
	{Name: "RA_GIT_INSECURE_HOSTS", Readers: []Reader{PlatformFunctions}, Value: "127.0.0.1,localhost,::1", Default: "`127.0.0.1,localhost,::1`",
		Meaning:      "comma-separated hosts (names or IPs) a workspace may clone from over plain `http` or `git`, and the only internal hosts (loopback, private, link-local) it may clone from at all (`https` works with every other host; `file:` and `ext::` with none); empty: none",
		emptyIsValue: true,
		set: func(p *Platform, v string) (err error) {
			p.GitInsecureHosts, err = insecureHosts("RA_GIT_INSECURE_HOSTS", splitList(v))
			return err
		}},
	{Name: "RA_GATEWAY_URL", Readers: []Reader{PlatformFunctions}, Default: "`RA_PUBLIC_BASE_URL`",
		Meaning: "where sandboxes reach the platform; launchers pass it on to each sandbox, whose agent calls its channel and tool callbacks there",
		set: func(p *Platform, v string) error {
			p.GatewayURL = strings.TrimRight(v, "/")
			return checkBaseURL("RA_GATEWAY_URL", v)
		}},
	{Name: "RA_JOBS_QUEUE_URL", Readers: []Reader{PlatformFunctions}, Default: "looked up by name (`ra-<env>-jobs`)",
		Meaning: "URL of the jobs queue",
		set:     func(p *Platform, v string) error { p.Queues.Jobs = v; return nil }},
	{Name: "RA_JOBS_DLQ_URL", Readers: []Reader{PlatformFunctions}, Default: "looked up by name",
		Meaning: "URL of the jobs queue's dead-letter queue",
		set:     func(p *Platform, v string) error { p.Queues.JobsDLQ = v; return nil }},
	{Name: "RA_TOOLS_QUEUE_URL", Readers: []Reader{PlatformFunctions}, Default: "looked up by name",
		Meaning: "URL of the tools queue",
		set:     func(p *Platform, v string) error { p.Queues.Tools = v; return nil }},
	{Name: "RA_TOOLS_DLQ_URL", Readers: []Reader{PlatformFunctions}, Default: "looked up by name",
		Meaning: "URL of the tools queue's dead-letter queue",
		set:     func(p *Platform, v string) error { p.Queues.ToolsDLQ = v; return nil }},
	{Name: "RA_WEBHOOKS_QUEUE_URL", Readers: []Reader{PlatformFunctions}, Default: "looked up by name (`ra-<env>-webhooks`)",
		Meaning: "URL of the webhooks queue: deliveries to the apps' endpoints, their retries and replays",
		set:     func(p *Platform, v string) error { p.Queues.Webhooks = v; return nil }},
	{Name: "RA_WEBHOOKS_DLQ_URL", Readers: []Reader{PlatformFunctions}, Default: "looked up by name",
		Meaning: "URL of the webhooks queue's dead-letter queue: deliveries refused for 24 hours",
		set:     func(p *Platform, v string) error { p.Queues.WebhooksDLQ = v; return nil }},
	{Name: "RA_WEBHOOKS_LOOPBACK", Readers: []Reader{PlatformFunctions}, Value: "false", Default: "`false`; `make dev`: `true`",
		Meaning: "`true` lets webhook endpoints be on loopback (`http://127.0.0.1:…`): receivers on the same machine. Private, link-local and metadata addresses are refused either way",
		set: func(p *Platform, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("RA_WEBHOOKS_LOOPBACK: %q is not true or false", v)
			}
			p.WebhooksLoopback = b
			return nil
		}},
	{Name: "RA_ORCHESTRATOR_QUEUE_URL", Readers: []Reader{PlatformFunctions}, Default: "looked up by name (`ra-<env>-orchestrator`)",
		Meaning: "URL of the queue the orchestrator reads job events on",
		set:     func(p *Platform, v string) error { p.OrchestratorQueue = v; return nil }},
	{Name: "RA_ORCHESTRATOR_ROLE_ARN", Readers: []Reader{PlatformFunctions}, Default: "on the dev server `arn:aws:iam::000000000000:role/ra-dev-orchestrator`; the stack: context `orchestratorRoleArn.<env>`, else `ra-<env>-orchestrator` of its account",
		Meaning: "the only caller of the `/internal/` routes (the orchestrator's IAM role)",
		set:     func(p *Platform, v string) error { p.OrchestratorRoleARN = strings.TrimSpace(v); return nil }},
	{Name: "RA_EVENTS_MAX_SECONDS", Readers: []Reader{PlatformFunctions}, Value: "840", Default: "`840`",
		Meaning: "an events stream ends after this many seconds, before its function's timeout; clients resume",
		set: func(p *Platform, v string) error {
			secs, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || secs <= 0 {
				return fmt.Errorf("RA_EVENTS_MAX_SECONDS: want a positive whole number of seconds, got %q", v)
			}
			p.EventsMaxDuration = time.Duration(secs) * time.Second
			return nil
		}},
	{Name: "RA_CHECKPOINT_INTERVAL_SECONDS", Readers: []Reader{PlatformFunctions}, Default: "`600`",
		Meaning: "how often an agent's sandbox writes a checkpoint between its turns (only what changed is uploaded), so that a sandbox lost or crashed loses at most that much: its agent is then paused on that checkpoint, not ended. `0`: checkpoints only when paused",
		set: func(p *Platform, v string) error {
			secs, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || secs < 0 || secs > 86400 {
				return fmt.Errorf("RA_CHECKPOINT_INTERVAL_SECONDS: want a whole number of seconds from 0 to 86400, got %q", v)
			}
			p.CheckpointInterval = time.Duration(secs) * time.Second
			return nil
		}},
	{Name: "RA_JOB_RETENTION_DAYS", Readers: []Reader{PlatformFunctions}, Value: strconv.Itoa(DefaultJobRetentionDays), Default: "`30`",
		Meaning: "a finished job (its item and its events) is kept this many days, then expires (DynamoDB TTL); the stack's lifecycle rule expires its files (`jobs/` in the bucket) after the same",
		set: func(p *Platform, v string) error {
			days, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || days < 1 || days > 3650 {
				return fmt.Errorf("RA_JOB_RETENTION_DAYS: want a whole number of days from 1 to 3650, got %q", v)
			}
			p.JobRetentionDays = days
			return nil
		}},
	{Name: "RA_ECS_CLUSTER", Readers: []Reader{PlatformFunctions}, Default: "none",
		Meaning: "the ECS cluster sandbox tasks run in",
		set:     func(p *Platform, v string) error { p.Fargate.Cluster = v; return nil }},
	{Name: "RA_ECS_TASK_DEFINITION", Readers: []Reader{PlatformFunctions}, Default: "none",
		Meaning: "the sandbox task definition",
		set:     func(p *Platform, v string) error { p.Fargate.TaskDefinition = v; return nil }},
	{Name: "RA_ECS_CONTAINER", Readers: []Reader{PlatformFunctions}, Value: "agent", Default: "`agent`",
		Meaning: "the agent's container in it",
		set:     func(p *Platform, v string) error { p.Fargate.Container = v; return nil }},
	{Name: "RA_ECS_SUBNETS", Readers: []Reader{PlatformFunctions}, Default: "none",
		Meaning: "comma-separated subnets of sandbox tasks",
		set:     func(p *Platform, v string) error { p.Fargate.Subnets = splitList(v); return nil }},
	{Name: "RA_ECS_SECURITY_GROUPS", Readers: []Reader{PlatformFunctions}, Default: "none",
		Meaning: "comma-separated security groups of sandbox tasks",
		set:     func(p *Platform, v string) error { p.Fargate.SecurityGroups = splitList(v); return nil }},
	{Name: "RA_ECS_ISOLATED_SECURITY_GROUPS", Readers: []Reader{PlatformFunctions}, Default: "none: sandboxes whose egress policy is not open fail to start",
		Meaning: "comma-separated security groups of sandbox tasks cut off from the network (their egress policy is not open): they reach the egress proxy only",
		set:     func(p *Platform, v string) error { p.Fargate.IsolatedSecurityGroups = splitList(v); return nil }},
	{Name: "RA_EGRESS_PROXY_URL", Readers: []Reader{PlatformFunctions}, Default: "none",
		Meaning: "the egress proxy sandboxes cut off from the network go through (`http://<internal load balancer>:3128`): their `HTTP(S)_PROXY`",
		set:     func(p *Platform, v string) error { p.Fargate.EgressProxyURL = v; return nil }},
	{Name: "RA_EGRESS_PROXY_ADDR", Readers: []Reader{PlatformFunctions}, Value: DefaultEgressProxyAddr, Default: "`" + DefaultEgressProxyAddr + "`",
		Meaning: "where the egress proxy service listens (services/egressproxy)",
		set:     func(p *Platform, v string) error { p.EgressProxy.Addr = v; return nil }},
	{Name: "RA_EGRESS_CA_SECRET", Readers: []Reader{PlatformFunctions}, Default: "none: random authorities (one replica)",
		Meaning: "the Secrets Manager secret the egress proxy's replicas derive each sandbox's certificate authority from",
		set:     func(p *Platform, v string) error { p.EgressProxy.CASecret = v; return nil }},
	{Name: "RA_E2B_TOKEN_SECRET", Readers: []Reader{PlatformFunctions}, Default: "none: a random key per process (the dev server)",
		Meaning: "the Secrets Manager secret (at least 32 characters) the sandbox API and the sandbox proxy derive sandboxes' envd access tokens from",
		set:     func(p *Platform, v string) error { p.E2B.TokenSecret = v; return nil }},
	{Name: "RA_SANDBOX_PROXY_ADDR", Readers: []Reader{PlatformFunctions}, Value: DefaultSandboxProxyAddr, Default: "`" + DefaultSandboxProxyAddr + "`",
		Meaning: "where the sandbox proxy service serves sandboxes' envd (services/sandboxproxy; the dev server's is `RA_E2B_SANDBOX_PORT`)",
		set:     func(p *Platform, v string) error { p.SandboxProxy.Addr = v; return nil }},
	{Name: "RA_SANDBOX_PROXY_HEALTH_ADDR", Readers: []Reader{PlatformFunctions}, Value: DefaultSandboxProxyHealthAddr, Default: "`" + DefaultSandboxProxyHealthAddr + "`",
		Meaning: "where the sandbox proxy service answers its load balancer's health checks (`GET /`): a port of its own, since every path of `RA_SANDBOX_PROXY_ADDR` is a sandbox's",
		set:     func(p *Platform, v string) error { p.SandboxProxy.HealthAddr = v; return nil }},
	{Name: "RA_E2B_DOMAIN", Readers: []Reader{PlatformFunctions}, Default: "none: the SDK's own (`E2B_DOMAIN`, `E2B_SANDBOX_URL`)",
		Meaning: "the sandbox domain the sandbox API answers: the SDKs reach envd at `https://49983-<sandbox id>.<domain>` (the sandbox proxy's)",
		set:     func(p *Platform, v string) error { p.E2B.Domain = v; return nil }},
	{Name: "RA_ECS_ASSIGN_PUBLIC_IP", Readers: []Reader{PlatformFunctions}, Value: "false", Default: "`false`",
		Meaning: "`true` gives sandbox tasks a public IP",
		set:     func(p *Platform, v string) error { p.Fargate.AssignPublicIP = v == "true"; return nil }},
	{Name: "RA_ECS_CPU", Readers: []Reader{PlatformFunctions}, Default: "the task definition's",
		Meaning: "overrides the task definition's CPU",
		set:     func(p *Platform, v string) error { p.Fargate.CPU = v; return nil }},
	{Name: "RA_ECS_MEMORY", Readers: []Reader{PlatformFunctions}, Default: "the task definition's",
		Meaning: "overrides the task definition's memory",
		set:     func(p *Platform, v string) error { p.Fargate.Memory = v; return nil }},
	{Name: "RA_ECS_CAPACITY_PROVIDER", Readers: []Reader{PlatformFunctions}, Default: "none: the `FARGATE` launch type, a failed launch retried as is",
		Meaning: "`FARGATE` or `FARGATE_SPOT`: where sandbox tasks run, the other one being where a failed launch is retried (the cluster needs both; the stack sets `FARGATE`)",
		set: func(p *Platform, v string) error {
			if v != "FARGATE" && v != "FARGATE_SPOT" {
				return fmt.Errorf("RA_ECS_CAPACITY_PROVIDER: want FARGATE or FARGATE_SPOT, got %q", v)
			}
			p.Fargate.CapacityProvider = v
			return nil
		}},
	{Name: "RA_MODEL_GATEWAY_URL", Readers: []Reader{PlatformFunctions, SandboxAgent}, Default: "`RA_GATEWAY_URL` (the sandbox: `PROLIFERATE_GATEWAY_URL`)",
		Meaning: "where sandboxes reach the model route (`/sandbox/{id}/model/…`: on AWS the model function's URL); launchers pass it on to each sandbox under the same name (when it differs from `RA_GATEWAY_URL`), and its agent points its hosted provider's SDK there",
		set: func(p *Platform, v string) error {
			p.Model.GatewayURL = strings.TrimRight(v, "/")
			return checkBaseURL("RA_MODEL_GATEWAY_URL", v)
		}},
	{Name: "RA_PUSH_URL", Readers: []Reader{PlatformFunctions, SandboxAgent}, Default: "none: sandboxes poll only (the dev server: its own `/@push`)",
		Meaning: "the push channel sandboxes connect to (`ws://` or `wss://`: on AWS the WebSocket API's stage URL); launchers pass it on to each sandbox under the same name, and the embed view's viewers connect to it too (without it the embed view reads the event stream)",
		set: func(p *Platform, v string) error {
			if !strings.HasPrefix(v, "ws://") && !strings.HasPrefix(v, "wss://") {
				return fmt.Errorf("RA_PUSH_URL: want a ws:// or wss:// URL, got %q", v)
			}
			p.Push.URL = v
			return nil
		}},
	{Name: "RA_PUSH_ENDPOINT", Readers: []Reader{PlatformFunctions}, Default: "none: nothing is pushed (the dev server: its own URL)",
		Meaning: "the push channel's `@connections` endpoint the platform posts to (`https://{api-id}.execute-api.{region}.amazonaws.com/{stage}`): sandboxes' wakes, and every event and live event to the agent's viewers",
		set: func(p *Platform, v string) error {
			p.Push.Endpoint = strings.TrimRight(v, "/")
			return checkBaseURL("RA_PUSH_ENDPOINT", v)
		}},
	{Name: "RA_MODEL_PROVIDERS", Readers: []Reader{PlatformFunctions}, Default: "all five",
		Meaning:      "comma-separated providers the model gateway serves (`anthropic`, `openai`, `gemini`, `mistral`, `bedrock`); empty: none",
		emptyIsValue: true,
		set: func(p *Platform, v string) error {
			p.Model.Providers = splitList(v)
			for _, name := range p.Model.Providers {
				if err := modelProvider("RA_MODEL_PROVIDERS", name); err != nil {
					return err
				}
			}
			return nil
		}},
	{Name: "RA_MODEL_ALLOWED", Readers: []Reader{PlatformFunctions}, Default: "none: any model",
		Meaning: "comma-separated `provider:model` pairs (the model as the provider's API names it, e.g. `bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0`): the only models a call to that provider may name; a provider not named takes any",
		set: func(p *Platform, v string) error {
			p.Model.Allowed = map[string][]string{}
			for _, pair := range splitList(v) {
				provider, model, ok := strings.Cut(pair, ":")
				if !ok || model == "" {
					return fmt.Errorf("RA_MODEL_ALLOWED: %q is not provider:model", pair)
				}
				if err := modelProvider("RA_MODEL_ALLOWED", provider); err != nil {
					return err
				}
				p.Model.Allowed[provider] = append(p.Model.Allowed[provider], model)
			}
			return nil
		}},
	{Name: "RA_MODEL_SECRET_ANTHROPIC", Readers: []Reader{PlatformFunctions}, Default: "none: `ANTHROPIC_API_KEY` from the process's environment (the dev server)",
		Meaning: "the Secrets Manager secret (id or ARN) whose value is Anthropic's API key, read once per cold start",
		set:     modelSecret(sandboxwire.ModelAnthropic)},
	{Name: "RA_MODEL_SECRET_OPENAI", Readers: []Reader{PlatformFunctions}, Default: "none: `OPENAI_API_KEY`",
		Meaning: "the same for OpenAI",
		set:     modelSecret(sandboxwire.ModelOpenAI)},
	{Name: "RA_MODEL_SECRET_GEMINI", Readers: []Reader{PlatformFunctions}, Default: "none: `GEMINI_API_KEY`, else `GOOGLE_API_KEY`",
		Meaning: "the same for Gemini",
		set:     modelSecret(sandboxwire.ModelGemini)},
	{Name: "RA_MODEL_SECRET_MISTRAL", Readers: []Reader{PlatformFunctions}, Default: "none: `MISTRAL_API_KEY`",
		Meaning: "the same for Mistral",
		set:     modelSecret(sandboxwire.ModelMistral)},
	{Name: "RA_MODEL_UPSTREAM_ANTHROPIC", Readers: []Reader{PlatformFunctions}, Default: "`https://api.anthropic.com`",
		Meaning: "the base URL the gateway sends Anthropic calls to",
		set:     modelUpstream(sandboxwire.ModelAnthropic, "RA_MODEL_UPSTREAM_ANTHROPIC")},
	{Name: "RA_MODEL_UPSTREAM_OPENAI", Readers: []Reader{PlatformFunctions}, Default: "`https://api.openai.com/v1`",
		Meaning: "the base URL the gateway sends OpenAI calls to (any compatible proxy: LiteLLM…)",
		set:     modelUpstream(sandboxwire.ModelOpenAI, "RA_MODEL_UPSTREAM_OPENAI")},
	{Name: "RA_MODEL_UPSTREAM_GEMINI", Readers: []Reader{PlatformFunctions}, Default: "`https://generativelanguage.googleapis.com`",
		Meaning: "the base URL the gateway sends Gemini calls to",
		set:     modelUpstream(sandboxwire.ModelGemini, "RA_MODEL_UPSTREAM_GEMINI")},
	{Name: "RA_MODEL_UPSTREAM_MISTRAL", Readers: []Reader{PlatformFunctions}, Default: "`https://api.mistral.ai/v1`",
		Meaning: "the base URL the gateway sends Mistral calls to",
		set:     modelUpstream(sandboxwire.ModelMistral, "RA_MODEL_UPSTREAM_MISTRAL")},
	{Name: "RA_MODEL_UPSTREAM_BEDROCK", Readers: []Reader{PlatformFunctions}, Default: "`https://bedrock-runtime.<region>.amazonaws.com`",
		Meaning: "the Bedrock runtime endpoint the gateway sends Bedrock calls to, signed with the function's own AWS credentials",
		set:     modelUpstream(sandboxwire.ModelBedrock, "RA_MODEL_UPSTREAM_BEDROCK")},
	{Name: "PROLIFERATE_SESSION_ID", Readers: []Reader{SandboxAgent}, Default: "none (required)",
		Meaning: "the session the sandbox runs"},
	{Name: "PROLIFERATE_GATEWAY_URL", Readers: []Reader{SandboxAgent}, Default: "none (required; launchers pass the platform's `RA_GATEWAY_URL`)",
		Meaning: "the platform's base URL: the sandbox channel and tool callbacks"},
	{Name: "RA_BOOTSTRAP_CODE", Readers: []Reader{SandboxAgent}, Default: "set by the launcher",
		Meaning: "the one-time code the agent exchanges for its sandbox token at start (`POST /sandbox/{id}/bootstrap`); works once, for 15 minutes"},
	{Name: "RA_POOL_SANDBOX", Readers: []Reader{SandboxAgent}, Default: "set by the warm pool's launches only",
		Meaning: "a warm pool sandbox's id (`pool-<uuid>`), instead of `PROLIFERATE_SESSION_ID`: the agent spends `RA_BOOTSTRAP_CODE` for a pool key (`POST /sandbox-pool/{id}/bootstrap`), waits on the push channel for a session to claim it, then bootstraps that session with the key"},
	{Name: "SANDBOX_MCP_AUTH_TOKEN", Readers: []Reader{SandboxAgent}, Default: "none (one of the two is required)",
		Meaning: "the sandbox token, bearer of every channel and tool call; platform launchers never set it (the agent gets it for `RA_BOOTSTRAP_CODE`)"},
	{Name: "RA_ENVD_LISTEN", Readers: []Reader{SandboxAgent}, Default: "set by the launcher: `unix:<the sandbox's folder>/envd.sock` locally, `:49983` on Fargate",
		Meaning: "where the sandbox serves envd, the E2B sandbox API (its processes, terminals and files) for the sandbox proxy: `unix:<path>` or `<host>:<port>`; unset, none"},
	{Name: "RA_TOOL_USER", Readers: []Reader{SandboxAgent}, Default: "none: the agent's own user",
		Meaning: "the user (name or id) the agent runs its tools' commands as; the agent must run as root, gives that user the workspace, the files its file tools write, attachments and the env file, and refuses to start if it cannot"},
	{Name: "RA_BASE_IMAGE", Readers: []Reader{SandboxAgent}, Default: "set by the launcher when the session's agent type has a `base_image`",
		Meaning: "the agent type's `base_image`. On Fargate the sandbox runs in it (the agent mounted from the platform's image); locally a sandbox is a process, and a `RA_SANDBOX_COMMAND` that runs containers may run the agent in this image (the agent itself does not read it)"},
	{Name: "RA_GENERATION", Readers: []Reader{SandboxAgent}, Default: "set by the launcher",
		Meaning: "the launch generation the sandbox runs for (informational)"},
	{Name: "RA_WORKSPACE", Readers: []Reader{SandboxAgent}, Default: "`.` (the dev server: the sandbox's folder)",
		Meaning: "the folder the agent works in"},
	{Name: "RA_JOB_ROOT", Readers: []Reader{SandboxAgent}, Default: "the workspace (the image: `/agent-space`)",
		Meaning: "where a sandbox in job mode lays out its job directory, `<root>/{job_id}/{input,work,output,memory,logs}` (see docs/jobs.md)"},
	{Name: "RA_JOB_NETWORK_ISOLATED", Readers: []Reader{SandboxAgent}, Default: "set by the launcher on a sandbox it launched cut off with egress `none` (a job without network whose tools include bash); unset, such a job's bash needs a network namespace of its own and fails (`policy_violation`, isolation unavailable) before anything runs where none can be made",
		Meaning: "any value: the launcher vouches the sandbox reaches nothing but the platform, so a job without network may run bash where no network namespace can be made (Fargate)"},
	{Name: "RA_SANDBOX_DEDICATED", Readers: []Reader{SandboxAgent}, Default: "unset (the stack sets it on the sandbox task)",
		Meaning: "any value: the sandbox is a machine of its own (a Fargate task), so on a kernel without Landlock a job's bash is confined by ownership alone (the root agent runs it as `RA_TOOL_USER`, who may write only the job's `work/` and `output/`); unset, such a job fails there"},
	{Name: "RA_ENV_FILE", Readers: []Reader{SandboxAgent}, Default: "`/tmp/.proliferate_env.json` (the dev server: `<sandbox folder>.tmp/.proliferate_env.json`, since its sandboxes share `/tmp`)",
		Meaning: "the JSON file values users submit, and those persisted for the session's configuration, are merged into (mode 0600, written atomically; a link at its path is refused)"},
	{Name: "RA_HEARTBEAT_SECONDS", Readers: []Reader{SandboxAgent}, Default: "`10`",
		Meaning: "seconds between heartbeats"},
	{Name: "RA_INBOX_POLL_SECONDS", Readers: []Reader{SandboxAgent}, Default: "`1`",
		Meaning: "seconds between inbox reads while the push connection is down (or there is none: no `RA_PUSH_URL`); while it is up the sandbox reads its inbox when pushed, and every 10 s should a push be lost; it reads it once as soon as it is ready, whatever waited for it"},
	{Name: "RA_LLM_PROVIDER", Readers: []Reader{SandboxAgent, DevServer}, Default: "none: the sandbox does not start, and create answers 503 `model_unavailable`",
		Meaning: "the model provider: `scripted`, `anthropic`, `openai`, `bedrock`, `gemini`, `mistral`, `ollama` or `openai-compatible` (see docs/local.md, \"Models\"); the dev server defaults it to `scripted`"},
	{Name: "RA_LLM_MODEL", Readers: []Reader{SandboxAgent, DevServer}, Default: "the provider's default; `ollama` and `openai-compatible` have none",
		Meaning: "the model, by the provider's id or a short name (`claude-sonnet-4.5`)"},
	{Name: "RA_LLM_API_KEY_ENV", Readers: []Reader{SandboxAgent, DevServer}, Default: "`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `GEMINI_API_KEY` then `GOOGLE_API_KEY`, `MISTRAL_API_KEY`; Bedrock uses the AWS credentials; local servers take none",
		Meaning: "names the variable holding the provider's API key; in `agent sandbox`, for local servers only (a hosted provider's calls carry the sandbox token to the model gateway)"},
	{Name: "RA_LLM_BASE_URL", Readers: []Reader{SandboxAgent, DevServer}, Default: "the provider's; `ollama`: `http://localhost:11434/v1`",
		Meaning: "the provider's endpoint (for `openai`, any compatible proxy: LiteLLM…; for `openai-compatible`, required: vLLM's `http://localhost:8000/v1`…); in `agent sandbox`, for local servers only (a hosted provider is reached at the model route, `RA_MODEL_GATEWAY_URL`)"},
	{Name: "RA_LLM_SCRIPT", Readers: []Reader{SandboxAgent, DevServer}, Default: "none: replies echo the message",
		Meaning: "the scripted provider's JSONL script, relative to the workspace"},
	{Name: "RA_LLM_MAX_TOKENS", Readers: []Reader{SandboxAgent, DevServer}, Default: "`4096`",
		Meaning: "bounds each reply of the model (1..1000000; sent as the provider's `max_tokens`, `max_completion_tokens` or `maxOutputTokens`)"},
	{Name: "RA_LLM_TEMPERATURE", Readers: []Reader{SandboxAgent, DevServer}, Default: "none: the model's default",
		Meaning: "the temperature sent with every request (0..2); `anthropic` takes none and refuses one"},
	{Name: "RA_TOKEN_LIMIT", Readers: []Reader{SandboxAgent, DevServer}, Default: "`0`: no limit",
		Meaning: "ends the session (`session.token_limit`) once input and output tokens exceed it"},
	{Name: "RA_LLM_CONTEXT_WINDOW", Readers: []Reader{SandboxAgent}, Default: "`200000`",
		Meaning: "the model's context window in tokens, shown against what the conversation holds"},
	{Name: "RA_TMUX_SESSION_NAME", Readers: []Reader{SandboxAgent}, Default: "none: no tmux",
		Meaning: "the tmux session (and socket) the agent runs in, when tmux is installed"},
	{Name: "RA_NO_TMUX", Readers: []Reader{SandboxAgent}, Default: "unset",
		Meaning: "any value keeps the agent out of tmux"},
	{Name: "RA_IN_TMUX", Readers: []Reader{SandboxAgent}, Default: "unset",
		Meaning: "set by the agent's tmux supervisor for the agent it starts in the session"},
	{Name: "RA_TMUX_SUPERVISOR_PID", Readers: []Reader{SandboxAgent}, Default: "unset",
		Meaning: "the supervisor's pid, set with `RA_IN_TMUX`: the agent stops if it dies"},
	{Name: "RA_TMUX_LOG_PIPE", Readers: []Reader{SandboxAgent}, Default: "unset",
		Meaning: "the pipe, set with `RA_IN_TMUX`, the agent writes its logs to: the supervisor copies them to its stderr, the sandbox's log stream"},
	{Name: "RA_TMUX_ENV_PIPE", Readers: []Reader{SandboxAgent}, Default: "unset",
		Meaning: "the pipe, set with `RA_IN_TMUX`, the agent reads its environment from (the launcher's, which the tmux server never holds)"},
	{Name: "RA_EMULATED_SQS", Readers: []Reader{Tooling}, Default: "unset",
		Meaning: "set by the bundled emulators (`goaws`): tests skip checks of its quirks"},
	{Name: "RA_GOAWS_BIN", Readers: []Reader{Tooling}, Default: "built into `.cache/bin`",
		Meaning: "a prebuilt goaws binary"},
	{Name: "RA_GOFAKES3_BIN", Readers: []Reader{Tooling}, Default: "built into `.cache/bin`",
		Meaning: "a prebuilt gofakes3 binary"},
	{Name: "RA_CHROMIUM", Readers: []Reader{Tooling}, Default: "`chromium` (or `chromium-browser`, `google-chrome`) on the `PATH`",
		Meaning: "the Chromium the embed view's browser tests drive"},
	{Name: "RA_ARTIFACTS", Readers: []Reader{Tooling}, Default: "the test's temporary folder",
		Meaning: "where the browser tests keep their screenshots"},
	{Name: "RA_BENCH_NO_TMUX", Readers: []Reader{Tooling}, Default: "unset",
		Meaning: "`BenchmarkCreateReady` starts sandboxes without their tmux session"},
	{Name: "RA_BENCH_OUT", Readers: []Reader{Tooling}, Default: "unset: nothing saved",
		Meaning: "the folder a benchmark saves its samples in (`make bench` sets it; `localstack/benchrec`)"},
	{Name: "RA_BENCH_E2B_FILE_MB", Readers: []Reader{Tooling}, Default: "`100` (`make test`'s short run: `16`)",
		Meaning: "the size of the file `BenchmarkE2B` uploads and downloads through the sandbox proxy, in MB"},
	{Name: "RA_BENCH_QUIET_SECONDS", Readers: []Reader{Tooling}, Default: "`30` (`make test`'s short run: `1`)",
		Meaning: "how long nothing happens to the agent before each append `BenchmarkViewerPushAfterQuiet` measures, in seconds"},
	{Name: "RA_BENCH_CHECKPOINT_LARGE_MB", Readers: []Reader{Tooling}, Default: "`1024` (`make test`'s short run: `64`)",
		Meaning: "the larger workspace `BenchmarkPauseResume` pauses and resumes, in MB"},
	{Name: "RA_BENCH_FLEET_SIZE", Readers: []Reader{Tooling}, Default: "`10000` (`make test`'s short run: `1000`)",
		Meaning: "the larger table of `BenchmarkFleetList`"},
	{Name: "RA_BENCH_JOBS", Readers: []Reader{Tooling}, Default: "`32` (`make test`'s short run: `4`)",
		Meaning: "how many jobs `BenchmarkJobDispatch` dispatches at once, cold and from a profile's warm pool of as many"},
	{Name: "RA_BOOTSTRAP_BIN", Readers: []Reader{Tooling}, Default: "`/opt/remote-agents/bootstrap`",
		Meaning: "the bootstrap binary LocalStack's init hook runs"},
	{Name: "RA_GUARDRAILS_FILE", Readers: []Reader{Tooling}, Default: "`/opt/remote-agents/platform-guardrails.md` (the compose file mounts `data/platform-guardrails.md` there)",
		Meaning: "the guardrails document LocalStack's init hook uploads to `RA_GUARDRAILS_PATH`"},
}

// Keys is the one table of config.yaml's remote_agents section: every key,
// the variable that overrides it and its default. shared/config's tests check
// that they are exactly the keys Parse accepts, with these defaults.
var Keys = []Key{
	{"remote_agents.allowed_origins", "RA_ALLOWED_ORIGINS", "[]",
		"origins that may frame the embed view and call the API from a browser (CORS)"},
	{"remote_agents.embed_features.file_upload", "RA_EMBED_FEATURES", "false",
		"the embed view's file upload, unless `create` says otherwise (the variable lists the features that are on: `file_upload,voice_mic`)"},
	{"remote_agents.embed_features.context_usage", "RA_EMBED_FEATURES", "false",
		"the embed view's context usage meter, unless `create` says otherwise"},
	{"remote_agents.embed_features.voice_mic", "RA_EMBED_FEATURES", "false",
		"the embed view's microphone, unless `create` says otherwise"},
	{"remote_agents.creation_timeout_seconds", "RA_CREATION_TIMEOUT_SECONDS", "15",
		"how long `create` waits for the agent to be ready (1..29: API Gateway stops at 30 s)"},
	{"remote_agents.public_base_url", "RA_PUBLIC_BASE_URL", `""`,
		"the platform's public address, which prefixes the `embed_url`s it hands out; the dev server defaults it to its own address"},
	{"remote_agents.guardrails_path", "RA_GUARDRAILS_PATH", DefaultGuardrailsPath,
		"the platform guardrails document: a file or `s3://bucket/key`"},
	{"remote_agents.exception_webhook_url", "RA_EXCEPTION_WEBHOOK_URL", `""`,
		"exception reports are POSTed here too"},
	{"remote_agents.workspace_defaults.cpu", "WORKSPACE_DEFAULT_CPU", `"1"`,
		"the vCPUs of a workspace whose agent type sets none"},
	{"remote_agents.workspace_defaults.memory", "WORKSPACE_DEFAULT_MEMORY", "2G",
		"its memory; with the CPU, a pair Fargate allows"},
	{"remote_agents.workspace_defaults.disk", "WORKSPACE_DEFAULT_DISK", "20G",
		"its disk, 20G to 200G"},
	{"remote_agents.git_insecure_hosts", "RA_GIT_INSECURE_HOSTS", `[127.0.0.1, localhost, "::1"]`,
		"hosts a workspace may clone from over plain `http` or `git`, and the only internal hosts it may clone from at all"},
	{"remote_agents.session_limits.max_session_seconds", "RA_MAX_SESSION_SECONDS", "86400",
		"the longest a session lives, then it ends `max_duration` (0: no bound; an agent type's may be lower)"},
	{"remote_agents.session_limits.idle_timeout_seconds", "RA_IDLE_TIMEOUT_SECONDS", "3600",
		"idle this long, a session ends `idle_timeout` (0: no bound)"},
	{"remote_agents.session_limits.max_tokens", "RA_MAX_SESSION_TOKENS", "0",
		"model tokens a session may use (as metered), then it ends `token_budget` (0: no bound)"},
	{"remote_agents.session_limits.max_cost_usd", "RA_MAX_SESSION_COST_USD", "0",
		"what a session's model calls may cost, then it ends `cost_budget` (0: no bound)"},
	{"remote_agents.session_limits.max_cost_usd_per_day", "RA_MAX_COST_USD_PER_DAY", "0",
		"an app's model spend a UTC day, held at the model gateway; over it, calls and creates are 429 `budget_exceeded` (0: no bound)"},
	{"remote_agents.session_limits.max_cost_usd_per_month", "RA_MAX_COST_USD_PER_MONTH", "0",
		"an app's model spend a UTC month, held at the model gateway (0: no bound)"},
	{"remote_agents.session_limits.price_table_path", "RA_PRICE_TABLE", `""`,
		"the price table (USD per million tokens by model); empty: the shipped `data/model-prices.json`"},
	{"remote_agents.quotas.concurrent_sessions", "RA_QUOTA_CONCURRENT_SESSIONS", "100",
		"live agents per app; past it, 429 `quota_exceeded`"},
	{"remote_agents.quotas.creates_per_minute", "RA_QUOTA_CREATES_PER_MINUTE", "60",
		"creates per app in one clock minute"},
	{"remote_agents.quotas.streams_per_session", "RA_QUOTA_STREAMS_PER_SESSION", "10",
		"open event streams of one agent"},
	{"remote_agents.quotas.uploads_per_session", "RA_QUOTA_UPLOADS_PER_SESSION", "1000",
		"presigned upload URLs one agent is granted over its life"},
	{"remote_agents.quotas.upload_gib_per_session", "RA_QUOTA_UPLOAD_GIB_PER_SESSION", "50",
		"the GiB one agent's upload URLs may carry together"},
	{"remote_agents.quotas.agent_types", "RA_QUOTA_AGENT_TYPES", "100",
		"agent types one app may keep"},
	{"remote_agents.quotas.warm_sandboxes", "RA_QUOTA_WARM_SANDBOXES", "0",
		"warm pool sandboxes one app's types may keep together (the sum of their `warm_pool_size`; 0: as many as the live quota)"},
}
