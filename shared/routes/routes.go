// Package routes is the system's route table: every HTTP route and the Lambda
// function that serves it. The dev server serves exactly these routes, every
// folder under functions/ is one of these functions, and the CDK stack puts
// each route on its function; tests keep the three in step with this table.
package routes

import "strings"

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
)

var table = []Route{
	{Method: "POST", Path: "/api/remote_agents/create", Function: "create"},
	{Method: "GET", Path: "/api/remote_agents/{id}/alive", Function: "alive"},
	{Method: "POST", Path: "/api/remote_agents/{id}/shutdown", Function: "shutdown"},
	{Method: "POST", Path: "/api/remote_agents/{id}/messages", Function: "messages"},
	{Method: "POST", Path: "/api/remote_agents/{id}/attachments", Function: "messages"},
	{Method: "POST", Path: "/api/remote_agents/{id}/env", Function: "messages"},
	// The fleet: an app's agents (app key), and kill (app key or session token).
	{Method: "GET", Path: "/api/remote_agents", Function: "fleet"},
	{Method: "POST", Path: "/api/remote_agents/{id}/kill", Function: "fleet"},
	{Method: "GET", Path: "/api/remote_agents/{id}/events", Function: "events", Stream: true},
	// Workspace tools apps run in their agent's sandbox (session token).
	{Method: "POST", Path: "/api/remote_agents/{id}/workspace/tools/{tool}", Function: "workspace"},
	{Method: "GET", Path: "/embed/{id}", Function: "embed", Public: true},
	{Method: "POST", Path: "/proliferate/{sessionId}/tools/{toolName}", Function: "toolcallback"},
	{Method: "POST", Path: "/sandbox/{sessionId}/bootstrap", Function: "sandbox"},
	{Method: "GET", Path: "/sandbox/{sessionId}/spec", Function: "sandbox"},
	{Method: "POST", Path: "/sandbox/{sessionId}/status", Function: "sandbox"},
	{Method: "POST", Path: "/sandbox/{sessionId}/heartbeat", Function: "sandbox"},
	{Method: "GET", Path: "/sandbox/{sessionId}/inbox", Function: "sandbox"},
	{Method: "POST", Path: "/sandbox/{sessionId}/events", Function: "sandbox"},
	{Method: "POST", Path: "/sandbox/{sessionId}/uploads", Function: "sandbox"},
	{Method: "POST", Path: "/sandbox/{sessionId}/tool-results", Function: "sandbox"},
	// Warm pool sandboxes, before a session claims them.
	{Method: "POST", Path: "/sandbox-pool/{sandboxId}/bootstrap", Function: "sandbox"},
	{Method: "POST", Path: "/sandbox-pool/{sandboxId}/heartbeat", Function: "sandbox"},
	// Agent types and their workspaces, for apps and operators (app key).
	{Method: "POST", Path: "/api/v1/agent-types", Function: "agenttypes"},
	{Method: "GET", Path: "/api/v1/agent-types", Function: "agenttypes"},
	{Method: "GET", Path: "/api/v1/agent-types/{id}", Function: "agenttypes"},
	{Method: "GET", Path: "/api/v1/agent-types/{id}/workspace-config", Function: "agenttypes"},
	{Method: "PUT", Path: "/api/v1/agent-types/{id}/workspace-config", Function: "agenttypes"},
	// The model gateway: a sandbox's model calls, forwarded with the
	// platform's credential; the answer streams back as the provider sends it.
	{Method: "POST", Path: "/sandbox/{sessionId}/model/{provider}/{proxy+}", Function: "model", Stream: true},
	// The orchestrator's jobs and agent profiles (IAM, the orchestrator only).
	{Method: "POST", Path: "/internal/jobs", Function: "jobs", Internal: true},
	{Method: "GET", Path: "/internal/jobs/{id}", Function: "jobs", Internal: true},
	{Method: "GET", Path: "/internal/jobs/{id}/logs", Function: "jobs", Internal: true},
	{Method: "GET", Path: "/internal/jobs/{id}/outputs", Function: "jobs", Internal: true},
	{Method: "POST", Path: "/internal/jobs/{id}/cancel", Function: "jobs", Internal: true},
	{Method: "PUT", Path: "/internal/agents/{id}", Function: "jobs", Internal: true},
	{Method: "GET", Path: "/internal/agents/{id}", Function: "jobs", Internal: true},
	{Method: "GET", Path: "/internal/agents", Function: "jobs", Internal: true},
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
	return append(out, JobWorker)
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
	return r.Path == "/api/remote_agents" || strings.HasPrefix(r.Path, "/api/remote_agents/")
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
// it ($disconnect). Sandboxes send nothing over it: it has no other route.
func Sockets() []SocketRoute {
	return []SocketRoute{{Key: "$connect", Function: "sandbox"}, {Key: "$disconnect", Function: "sandbox"}}
}
