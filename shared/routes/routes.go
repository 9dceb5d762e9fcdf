// Package routes is the system's route table: every HTTP route and the Lambda
// function that serves it. The dev server serves exactly these routes, every
// folder under functions/ is one of these functions, and the CDK stack puts
// each route on its function; tests keep the three in step with this table.
package routes

import (
	"strings"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Route is one HTTP route and its function.
type Route struct {
	Method string
	// Path is the API Gateway path pattern, e.g. /api/remote_agents/{id}/alive;
	// a last {name+} takes the rest of the path.
	Path     string
	Function string
	// Stream routes answer with a streamed body (Server-Sent Events, AWS
	// event streams): on AWS they are served through a Lambda function URL
	// with response streaming.
	Stream bool
	// Public routes carry no bearer token an API authorizer could check: they
	// authenticate in the handler (all do; the flag documents browser routes).
	Public bool
	// Internal routes are the orchestrator's (/internal/): IAM authorization
	// on AWS, only the orchestrator's role allowed; the dev server verifies
	// their SigV4 signatures itself.
	Internal bool
}

// Functions that serve no route.
const (
	// JobWorker consumes the jobs and tools queues.
	JobWorker = "jobworker"
	// Webhooks delivers the apps' webhooks: it reads the events table's
	// stream and consumes the webhooks queue.
	Webhooks = "webhooks"
)

// Workers are the functions that serve no route, in order.
var Workers = []string{JobWorker, Webhooks}

// The routes' paths, each named once: the table below, the handlers'
// patterns and the tests take them from here (the sandbox channel's from the
// wire package, which the sandbox shares).
const (
	PathCreate      = "/api/remote_agents/create"
	PathAgents      = "/api/remote_agents"
	PathAlive       = "/api/remote_agents/{id}/alive"
	PathShutdown    = "/api/remote_agents/{id}/shutdown"
	PathMessages    = "/api/remote_agents/{id}/messages"
	PathAttachments = "/api/remote_agents/{id}/attachments"
	PathEnv         = "/api/remote_agents/{id}/env"
	PathKill        = "/api/remote_agents/{id}/kill"
	PathEvents      = "/api/remote_agents/{id}/events"
	// PathSecrets and PathSecret are an app's secrets (app key).
	PathSecrets = "/api/v1/secrets"        //nolint:gosec // a route, not a credential
	PathSecret  = "/api/v1/secrets/{name}" //nolint:gosec // a route, not a credential
	// PathWebhooks and PathWebhook are an app's webhook endpoints (app
	// key); PathWebhookRotate, PathWebhookDeliveries and PathWebhookReplay
	// one endpoint's secret rotation, delivery log and replays.
	PathWebhooks          = "/api/v1/webhooks"
	PathWebhook           = "/api/v1/webhooks/{id}"
	PathWebhookRotate     = "/api/v1/webhooks/{id}/rotate"
	PathWebhookDeliveries = "/api/v1/webhooks/{id}/deliveries"
	PathWebhookReplay     = "/api/v1/webhooks/{id}/replay"
	// PathEgress changes a live agent's egress policy.
	PathEgress = "/api/remote_agents/{id}/egress"
	// PathPause pauses an agent (a checkpoint, then no sandbox), PathResume
	// resumes it from its checkpoint, PathCheckpoints lists them.
	PathPause       = "/api/remote_agents/{id}/pause"
	PathResume      = "/api/remote_agents/{id}/resume"
	PathCheckpoints = "/api/remote_agents/{id}/checkpoints"
	// PathFork makes a new agent from an agent's last checkpoint.
	PathFork = "/api/remote_agents/{id}/fork"
	// PathWorkspaceTool runs a workspace tool in the agent's sandbox.
	PathWorkspaceTool = "/api/remote_agents/{id}/workspace/tools/{tool}"
	PathEmbed         = "/embed/{id}"
	// PathToolCallback is the spec's gateway tool callback.
	PathToolCallback = "/proliferate/{sessionId}/tools/{toolName}"
	// PathModel is the model gateway: the rest of the path is the provider's.
	PathModel = sandboxwire.Prefix + "{sessionId}/" + sandboxwire.RouteModel + "/{provider}/{proxy+}"
	// The agent types (app key).
	PathAgentTypes      = "/api/v1/agent-types"
	PathAgentType       = "/api/v1/agent-types/{id}"
	PathWorkspaceConfig = "/api/v1/agent-types/{id}/workspace-config"
	// PathUsage is an app's live agents and spend against its quotas and
	// caps (app key).
	PathUsage = "/api/v1/usage"
	// PathLimits is the app key's own limits (app key): read, and set
	// within the platform's.
	PathLimits = "/api/v1/limits"
	// The orchestrator's routes (InternalPrefix).
	PathJobs    = "/internal/jobs"
	PathJob     = "/internal/jobs/{id}"
	PathJobLogs = "/internal/jobs/{id}/logs"
	// PathJobLogStream follows a job's log live (Server-Sent Events).
	PathJobLogStream  = "/internal/jobs/{id}/logs/stream"
	PathJobOutputs    = "/internal/jobs/{id}/outputs"
	PathJobCancel     = "/internal/jobs/{id}/cancel"
	PathJobRetry      = "/internal/jobs/{id}/retry"
	PathAgentProfiles = "/internal/agents"
	PathAgentProfile  = "/internal/agents/{id}"
	// The sandbox API: E2B's control plane under E2BPrefix (X-API-Key, an
	// app key), before /v2 and after it.
	PathE2BSandboxes   = E2BPrefix + "/sandboxes"
	PathE2BSandboxesV2 = E2BPrefix + "/v2/sandboxes"
	PathE2BSandbox     = E2BPrefix + "/sandboxes/{id}"
	PathE2BConnect     = E2BPrefix + "/sandboxes/{id}/connect"
	PathE2BConnectV2   = E2BPrefix + "/v2/sandboxes/{id}/connect"
	PathE2BTimeout     = E2BPrefix + "/sandboxes/{id}/timeout"
	PathE2BPause       = E2BPrefix + "/sandboxes/{id}/pause"
	PathE2BMetrics     = E2BPrefix + "/sandboxes/{id}/metrics"
)

// E2BPrefix is where the sandbox API is served: the E2B SDKs' API URL
// (E2B_API_URL) is the platform's base URL and this.
const E2BPrefix = "/e2b"

// SandboxPath is the path of the sandbox channel's route name
// (sandboxwire.RouteSpec…) for a session's sandbox.
func SandboxPath(name string) string { return sandboxwire.Prefix + "{sessionId}/" + name }

// PoolPath is the path of route name for a warm pool sandbox.
func PoolPath(name string) string { return sandboxwire.PoolPrefix + "{sandboxId}/" + name }

var table = []Route{
	{Method: "POST", Path: PathCreate, Function: "create"},
	{Method: "GET", Path: PathAlive, Function: "alive"},
	{Method: "POST", Path: PathShutdown, Function: "shutdown"},
	{Method: "POST", Path: PathMessages, Function: "messages"},
	{Method: "POST", Path: PathAttachments, Function: "messages"},
	{Method: "POST", Path: PathEnv, Function: "messages"},
	// The fleet: an app's agents (app key), and kill (app key or session token).
	{Method: "GET", Path: PathAgents, Function: "fleet"},
	{Method: "POST", Path: PathKill, Function: "fleet"},
	{Method: "PATCH", Path: PathEgress, Function: "fleet"},
	{Method: "POST", Path: PathPause, Function: "fleet"},
	{Method: "POST", Path: PathResume, Function: "fleet"},
	{Method: "GET", Path: PathCheckpoints, Function: "fleet"},
	{Method: "POST", Path: PathFork, Function: "create"},
	{Method: "GET", Path: PathUsage, Function: "fleet"},
	{Method: "GET", Path: PathLimits, Function: "fleet"},
	{Method: "PUT", Path: PathLimits, Function: "fleet"},
	{Method: "GET", Path: PathEvents, Function: "events", Stream: true},
	// Workspace tools apps run in their agent's sandbox (session token).
	{Method: "POST", Path: PathWorkspaceTool, Function: "workspace"},
	{Method: "GET", Path: PathEmbed, Function: "embed", Public: true},
	{Method: "POST", Path: PathToolCallback, Function: "toolcallback"},
	{Method: "POST", Path: SandboxPath(sandboxwire.RouteBootstrap), Function: "sandbox"},
	{Method: "GET", Path: SandboxPath(sandboxwire.RouteSpec), Function: "sandbox"},
	{Method: "POST", Path: SandboxPath(sandboxwire.RouteStatus), Function: "sandbox"},
	{Method: "POST", Path: SandboxPath(sandboxwire.RouteHeartbeat), Function: "sandbox"},
	{Method: "GET", Path: SandboxPath(sandboxwire.RouteInbox), Function: "sandbox"},
	{Method: "POST", Path: SandboxPath(sandboxwire.RouteEvents), Function: "sandbox"},
	{Method: "POST", Path: SandboxPath(sandboxwire.RouteDeltas), Function: "sandbox"},
	{Method: "POST", Path: SandboxPath(sandboxwire.RouteUploads), Function: "sandbox"},
	{Method: "POST", Path: SandboxPath(sandboxwire.RouteToolResults), Function: "sandbox"},
	{Method: "POST", Path: SandboxPath(sandboxwire.RouteCheckpointUploads), Function: "sandbox"},
	{Method: "POST", Path: SandboxPath(sandboxwire.RouteCheckpointDownloads), Function: "sandbox"},
	{Method: "POST", Path: SandboxPath(sandboxwire.RouteCheckpoints), Function: "sandbox"},
	// Warm pool sandboxes, before a session claims them.
	{Method: "POST", Path: PoolPath(sandboxwire.RouteBootstrap), Function: "sandbox"},
	{Method: "POST", Path: PoolPath(sandboxwire.RouteHeartbeat), Function: "sandbox"},
	// Agent types and their workspaces, for apps and operators (app key).
	{Method: "POST", Path: PathAgentTypes, Function: "agenttypes"},
	{Method: "GET", Path: PathAgentTypes, Function: "agenttypes"},
	{Method: "GET", Path: PathAgentType, Function: "agenttypes"},
	{Method: "GET", Path: PathWorkspaceConfig, Function: "agenttypes"},
	{Method: "PUT", Path: PathWorkspaceConfig, Function: "agenttypes"},
	// An app's secrets, write-only (app key).
	{Method: "POST", Path: PathSecrets, Function: "agenttypes"},
	{Method: "GET", Path: PathSecrets, Function: "agenttypes"},
	{Method: "PUT", Path: PathSecret, Function: "agenttypes"},
	{Method: "DELETE", Path: PathSecret, Function: "agenttypes"},
	{Method: "POST", Path: PathWebhooks, Function: "agenttypes"},
	{Method: "GET", Path: PathWebhooks, Function: "agenttypes"},
	{Method: "GET", Path: PathWebhook, Function: "agenttypes"},
	{Method: "PATCH", Path: PathWebhook, Function: "agenttypes"},
	{Method: "DELETE", Path: PathWebhook, Function: "agenttypes"},
	{Method: "POST", Path: PathWebhookRotate, Function: "agenttypes"},
	{Method: "GET", Path: PathWebhookDeliveries, Function: "agenttypes"},
	{Method: "POST", Path: PathWebhookReplay, Function: "agenttypes"},
	// The model gateway: a sandbox's model calls, forwarded with the
	// platform's credential; the answer streams back as the provider sends it.
	{Method: "POST", Path: PathModel, Function: "model", Stream: true},

	// The sandbox API (package e2bapi).
	{Method: "POST", Path: PathE2BSandboxes, Function: "e2b"},
	{Method: "POST", Path: PathE2BSandboxesV2, Function: "e2b"},
	{Method: "GET", Path: PathE2BSandboxesV2, Function: "e2b"},
	{Method: "GET", Path: PathE2BSandbox, Function: "e2b"},
	{Method: "DELETE", Path: PathE2BSandbox, Function: "e2b"},
	{Method: "POST", Path: PathE2BConnect, Function: "e2b"},
	{Method: "POST", Path: PathE2BConnectV2, Function: "e2b"},
	{Method: "POST", Path: PathE2BTimeout, Function: "e2b"},
	{Method: "POST", Path: PathE2BPause, Function: "e2b"},
	{Method: "GET", Path: PathE2BMetrics, Function: "e2b"},
	// The orchestrator's jobs and agent profiles (IAM, the orchestrator only).
	{Method: "POST", Path: PathJobs, Function: "jobs", Internal: true},
	{Method: "GET", Path: PathJob, Function: "jobs", Internal: true},
	{Method: "GET", Path: PathJobLogs, Function: "jobs", Internal: true},
	// A job's log followed live: on AWS its own function's URL (IAM auth).
	{Method: "GET", Path: PathJobLogStream, Function: "joblogs", Stream: true, Internal: true},
	{Method: "GET", Path: PathJobOutputs, Function: "jobs", Internal: true},
	{Method: "POST", Path: PathJobCancel, Function: "jobs", Internal: true},
	{Method: "POST", Path: PathJobRetry, Function: "jobs", Internal: true},
	{Method: "PUT", Path: PathAgentProfile, Function: "jobs", Internal: true},
	{Method: "GET", Path: PathAgentProfile, Function: "jobs", Internal: true},
	{Method: "GET", Path: PathAgentProfiles, Function: "jobs", Internal: true},
}

// All returns every route.
func All() []Route { return append([]Route(nil), table...) }

// Functions returns every function's name, those with routes first, in order.
func Functions() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range table {
		if !seen[r.Function] {
			seen[r.Function] = true
			out = append(out, r.Function)
		}
	}
	return append(out, Workers...)
}

// InternalPrefix starts the path of every Internal route.
const InternalPrefix = "/internal/"

// Key is the route's API Gateway route key, "METHOD /path".
func (r Route) Key() string { return r.Method + " " + r.Path }

// CORS: browsers at the allowed origins (remote_agents.allowed_origins) call
// the browser routes. The handlers answer their preflights with this policy
// (httpapi.CORS; the dev server, and the events route's function URL on AWS),
// and so does API Gateway for the API's routes (the stack's CorsPreflight), so
// the two agree.
const (
	// CORSMaxAge is how long, in seconds, a browser may cache a preflight.
	CORSMaxAge = 600
)

// CORSAllowHeaders are the request headers a browser may send.
func CORSAllowHeaders() []string {
	return []string{"Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID", "X-Session-Token"}
}

// CORSExposeHeaders are the response headers a browser's script may read.
func CORSExposeHeaders() []string { return []string{"Retry-After", "Idempotent-Replayed"} }

// CORS reports whether browsers call r from the allowed origins: the
// remote_agents API, /api/remote_agents and under it. The embed view is
// served from the public origin itself, and the sandbox and tool routes are
// servers'.
func (r Route) CORS() bool {
	return r.Path == PathAgents || strings.HasPrefix(r.Path, PathAgents+"/")
}

// SocketRoute is a route of the push channel's WebSocket API (on AWS an API
// Gateway WebSocket API; locally the dev server's) and the function serving it.
type SocketRoute struct {
	// Key is the route key, $connect or $disconnect.
	Key      string
	Function string
}

// Sockets returns the push channel's routes: the sandbox function
// authenticates a sandbox's connection and records it ($connect), and forgets
// it ($disconnect); an agent's viewer (the embed view) connects the same
// way, naming the agent, and sends its syncs ($default, package
// viewerpush). Sandboxes send nothing over it.
func Sockets() []SocketRoute {
	return []SocketRoute{{Key: "$connect", Function: "sandbox"}, {Key: "$disconnect", Function: "sandbox"}, {Key: "$default", Function: "sandbox"}}
}
