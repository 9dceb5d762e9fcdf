package wiring

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/url"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/remote-agents/remote-agents/shared/agenttypeapi"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/embedview"
	"github.com/remote-agents/remote-agents/shared/eventsapi"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/jobapi"
	"github.com/remote-agents/remote-agents/shared/jobworker"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/modelapi"
	"github.com/remote-agents/remote-agents/shared/modelgateway"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/sandboxapi"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sessionapi"
	"github.com/remote-agents/remote-agents/shared/smsecrets"
	"github.com/remote-agents/remote-agents/shared/toolapi"
	"github.com/remote-agents/remote-agents/shared/toolgate"
	"github.com/remote-agents/remote-agents/shared/workspaceapi"
)

// Function is one Lambda function, built: the routes it serves, or the queue
// batches it handles.
type Function struct {
	Name string
	// Routes are its HTTP routes, as package routes assigns them.
	Routes []httpapi.Route
	// Socket, if set, serves the push channel's WebSocket routes
	// (routes.Sockets) besides Routes.
	Socket httpapi.SocketHandler
	// Worker handles SQS batches (jobworker).
	Worker func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
}

// Builder builds one function in an Env.
type Builder func(context.Context, *Env) (Function, error)

// Handler is what lambda.Start takes for f: a function URL stream for its
// streaming route, a router over its routes (which also serves them through a
// function URL: httpapi.Router), or its queue handler.
func (f Function) Handler() any {
	switch {
	case f.Worker != nil:
		return f.Worker
	case f.Socket != nil:
		return httpapi.WithSocket(httpapi.Router(f.Routes), f.Socket)
	case len(f.Routes) == 1 && f.Routes[0].Stream != nil:
		return httpapi.FunctionURLStream(f.Routes[0].Method, f.Routes[0].Pattern, f.Routes[0].Stream)
	default:
		return httpapi.Router(f.Routes)
	}
}

// Option adjusts the Env a Lambda function is built in.
type Option func(*Env) error

// WithLauncher starts sandboxes with the launcher newLauncher builds from the
// AWS and Fargate configuration (fargate.FromConfig): only jobworker launches,
// so only its binary links a launcher.
func WithLauncher(newLauncher func(aws.Config, config.Fargate) (launch.Launcher, error)) Option {
	return func(e *Env) error {
		l, err := newLauncher(e.AWS, e.Config.Fargate)
		e.Launcher = l
		return err
	}
}

// Lambda builds a function from the process's environment at cold start and
// returns what lambda.Start takes; it exits the process if it cannot.
func Lambda(build Builder, opts ...Option) any {
	ctx := context.Background()
	e, err := FromEnvironment(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range opts {
		if err := o(e); err != nil {
			log.Fatal(err)
		}
	}
	f, err := build(ctx, e)
	if err != nil {
		log.Fatal(err)
	}
	return f.Handler()
}

// Create builds the create function: POST /api/remote_agents/create.
func Create(ctx context.Context, e *Env) (Function, error) {
	jobs, err := e.Jobs(ctx)
	if err != nil {
		return Function{}, err
	}
	svc := session.NewService(session.Options{
		Store:           e.SessionStore(),
		Quotas:          e.quotas(),
		Registry:        e.Registry(),
		AgentTypes:      e.AgentTypes(),
		Guardrails:      e.Guardrails(),
		Jobs:            jobs,
		Reporter:        e.Reporter(),
		Log:             e.Log,
		CreationTimeout: e.Config.CreationTimeout,
		PublicBaseURL:   e.Config.PublicBaseURL,
		DefaultFeatures: e.Config.EmbedFeatures,
		// Create validates task_context's URL with them.
		GitInsecureHosts: e.Config.GitInsecureHosts,
	})
	return sessionRoutes("create", svc, e)
}

// AgentTypes builds the agenttypes function: the agent type routes, app key
// authenticated.
func AgentTypes(_ context.Context, e *Env) (Function, error) {
	auth := session.NewService(session.Options{Registry: e.Registry(), Log: e.Log})
	h := &agenttypeapi.Handlers{Auth: auth, Types: e.AgentTypes(), Log: e.Log}
	return pick("agenttypes", h.Routes())
}

// Alive builds the alive function: GET /api/remote_agents/{id}/alive. It
// reports the current guardrails' hash, and stops what is left of a sandbox it
// finds lost.
func Alive(ctx context.Context, e *Env) (Function, error) {
	jobs, err := e.Jobs(ctx)
	if err != nil {
		return Function{}, err
	}
	svc := session.NewService(session.Options{Store: e.SessionStore(), Guardrails: e.Guardrails(), Jobs: jobs, Limits: e.limits(), Log: e.Log})
	return sessionRoutes("alive", svc, e)
}

// Shutdown builds the shutdown function: POST /api/remote_agents/{id}/shutdown.
func Shutdown(ctx context.Context, e *Env) (Function, error) {
	jobs, err := e.Jobs(ctx)
	if err != nil {
		return Function{}, err
	}
	svc := session.NewService(session.Options{Store: e.SessionStore(), Jobs: jobs, Notifier: e.Notifier(), Log: e.Log})
	return sessionRoutes("shutdown", svc, e)
}

// Messages builds the messages function: what users send an agent (messages,
// attachments, env values).
func Messages(_ context.Context, e *Env) (Function, error) {
	svc := session.NewService(session.Options{Store: e.SessionStore(), Blob: e.Bucket(), Secrets: e.Bucket(), Notifier: e.Notifier(), Log: e.Log})
	return sessionRoutes("messages", svc, e)
}

func sessionRoutes(name string, svc *session.Service, e *Env) (Function, error) {
	return pick(name, sessionapi.New(svc, e.Log).Routes(e.Config.AllowedOrigins))
}

// Workspace builds the workspace function: the workspace tools apps run in
// their agent's sandbox, through its inbox.
func Workspace(_ context.Context, e *Env) (Function, error) {
	svc := session.NewService(session.Options{Store: e.SessionStore(), ToolResults: e.toolResults(), Notifier: e.Notifier(), Log: e.Log})
	return pick("workspace", (&workspaceapi.Handlers{Sessions: svc, Log: e.Log}).Routes(e.Config.AllowedOrigins))
}

// toolResults is the workspace tool results' store.
func (e *Env) toolResults() *dynamo.ToolResults {
	return dynamo.NewToolResults(e.dynamoDB(), e.Resources.Idempotency.Name)
}

// Fleet builds the fleet function: GET /api/remote_agents (an app's agents)
// and POST /api/remote_agents/{id}/kill.
func Fleet(ctx context.Context, e *Env) (Function, error) {
	jobs, err := e.Jobs(ctx)
	if err != nil {
		return Function{}, err
	}
	svc := session.NewService(session.Options{Store: e.SessionStore(), Registry: e.Registry(), Jobs: jobs, Notifier: e.Notifier(), Limits: e.limits(), Log: e.Log})
	return sessionRoutes("fleet", svc, e)
}

// Events builds the events function: the SSE stream of an agent's events.
func Events(_ context.Context, e *Env) (Function, error) {
	h := &eventsapi.Handlers{
		Sessions:    session.NewService(session.Options{Store: e.SessionStore(), Quotas: e.quotas(), Log: e.Log}),
		Store:       e.SessionStore(),
		Log:         e.Log,
		MaxDuration: e.Config.EventsMaxDuration,
	}
	return pick("events", h.Routes(e.Config.AllowedOrigins))
}

// Embed builds the embed function: the embed view's page.
func Embed(ctx context.Context, e *Env) (Function, error) {
	h := &embedview.Handlers{
		Sessions:       session.NewService(session.Options{Store: e.SessionStore(), Log: e.Log}),
		AllowedOrigins: e.Config.AllowedOrigins,
		UploadOrigin:   uploadOrigin(ctx, e),
		Log:            e.Log,
	}
	return pick("embed", h.Routes())
}

// uploadOrigin is the origin presigned upload URLs point at, which the embed
// view's Content-Security-Policy lets the page PUT attachments to.
func uploadOrigin(ctx context.Context, e *Env) string {
	u, err := e.Bucket().PresignPut(ctx, "origin-probe", "", 0, time.Minute)
	if err != nil {
		return ""
	}
	parsed, err := url.Parse(u.URL)
	if err != nil {
		return ""
	}
	return parsed.Scheme + "://" + parsed.Host
}

// Sandbox builds the sandbox function: the sandbox channel.
func Sandbox(ctx context.Context, e *Env) (Function, error) {
	jobs, err := e.JobRuns(ctx)
	if err != nil {
		return Function{}, err
	}
	ch := session.NewChannel(session.Options{
		Limits:     e.limits(),
		JobRuns:    jobs,
		Store:      e.SessionStore(),
		Registry:   e.Registry(),
		Guardrails: e.Guardrails(),
		Reporter:   e.Reporter(),
		Blob:       e.Bucket(),
		Secrets:    e.Bucket(),
		Log:        e.Log,
		// The spec passes them on: the sandbox checks its clone URL too.
		GitInsecureHosts: e.Config.GitInsecureHosts,
		ToolResults:      e.toolResults(),
	})
	h := &sandboxapi.Handlers{Channel: ch, Pool: e.Pool(), Log: e.Log}
	f, err := pick("sandbox", h.Routes())
	f.Socket = h.Socket
	return f, err
}

// Model builds the model function: the model gateway, a streamed route. The
// providers' keys come from Secrets Manager where RA_MODEL_SECRET_<PROVIDER>
// names a secret (read once per cold start), else from KeyLookup (the
// process's environment); Bedrock calls are signed with the function's own
// AWS credentials.
func Model(_ context.Context, e *Env) (Function, error) {
	lookup := e.KeyLookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var keys modelgateway.FirstKey
	if len(e.Config.Model.Secrets) > 0 {
		keys = append(keys, smsecrets.New(secretsmanager.NewFromConfig(e.AWS), e.Config.Model.Secrets))
	}
	keys = append(keys, modelgateway.EnvKeys(lookup))
	prices, err := e.prices()
	if err != nil {
		return Function{}, err
	}
	gw := modelgateway.New(modelgateway.Options{Store: e.SessionStore(), Model: e.Config.Model, Keys: keys, Region: e.AWS.Region, Prices: prices, Log: e.Log})
	return pick("model", (&modelapi.Handlers{Gateway: gw, AWS: e.AWS, Log: e.Log, Metered: e.Metered}).Routes())
}

// ToolCallback builds the toolcallback function: the gateway-mediated tools.
func ToolCallback(ctx context.Context, e *Env) (Function, error) {
	gate, err := tools(ctx, e)
	if err != nil {
		return Function{}, err
	}
	return pick("toolcallback", (&toolapi.Handlers{Gate: gate, Log: e.Log}).Routes())
}

// tools is the gateway tools' service.
func tools(ctx context.Context, e *Env) (*toolgate.Service, error) {
	q, err := e.ToolsQueue(ctx)
	if err != nil {
		return nil, err
	}
	ddb, set := e.dynamoDB(), e.Resources
	return toolgate.New(toolgate.Options{
		Sessions: e.SessionStore(),
		Records:  dynamo.NewToolCalls(ddb, set.Idempotency.Name),
		Executor: &toolgate.Effects{Blob: e.Bucket(), Registry: e.Registry(), Sessions: e.SessionStore(), Runs: dynamo.NewRuns(ddb, set.Jobs.Name)},
		Queue:    q,
		Log:      e.Log,
	}), nil
}

// JobWorker builds jobworker: the jobs queue (sandbox launches and stops, task
// state) and the tools queue (long gateway tool calls). Sandboxes start with
// the Env's Launcher (WithLauncher on Lambda).
func JobWorker(ctx context.Context, e *Env) (Function, error) {
	if e.Launcher == nil {
		return Function{}, errors.New("jobworker needs a launcher")
	}
	gate, err := tools(ctx, e)
	if err != nil {
		return Function{}, err
	}
	jobsDLQ, toolsDLQ, err := e.dlqs(ctx)
	if err != nil {
		return Function{}, err
	}
	sweeper := session.NewService(session.Options{Store: e.SessionStore(), Log: e.Log})
	jobService, err := e.JobRuns(ctx)
	if err != nil {
		return Function{}, err
	}
	w := &jobworker.Worker{Jobs: jobService, Store: e.SessionStore(), Launcher: e.Launcher, DLQ: jobsDLQ, GatewayURL: e.Config.GatewayURL, ModelGatewayURL: e.Config.Model.GatewayURL, PushURL: e.Config.Push.URL, Tools: gate, ToolsDLQ: toolsDLQ, Sweeper: sweeper, Pool: e.Pool(), Log: e.Log}
	return Function{Name: routes.JobWorker, Worker: w.Handle}, nil
}

// Jobs builds the jobs function: the orchestrator's /internal/ routes, for
// its role only (RA_ORCHESTRATOR_ROLE_ARN).
func Jobs(ctx context.Context, e *Env) (Function, error) {
	svc, err := e.JobService(ctx)
	if err != nil {
		return Function{}, err
	}
	if e.Config.OrchestratorRoleARN == "" {
		return Function{}, errors.New("jobs needs the orchestrator's role (RA_ORCHESTRATOR_ROLE_ARN)")
	}
	return pick("jobs", (&jobapi.Handlers{Jobs: svc, Caller: e.Config.OrchestratorRoleARN, Log: e.Log}).Routes())
}

// pick keeps the routes package routes gives function name, and fails unless
// every one of them has a handler.
func pick(name string, from []httpapi.Route) (Function, error) {
	byKey := make(map[string]httpapi.Route, len(from))
	for _, r := range from {
		byKey[r.Key()] = r
	}
	f := Function{Name: name}
	for _, r := range routes.All() {
		if r.Function != name {
			continue
		}
		h, ok := byKey[r.Key()]
		if !ok {
			return Function{}, fmt.Errorf("function %s has no handler for %s", name, r.Key())
		}
		f.Routes = append(f.Routes, h)
	}
	if len(f.Routes) == 0 {
		return Function{}, fmt.Errorf("function %s serves no route", name)
	}
	return f, nil
}

// Builders returns every function's constructor by its name in package routes.
// (A function, not a variable, so that a Lambda binary calling one constructor
// links none of the others.)
func Builders() map[string]Builder {
	return map[string]Builder{
		"create":         Create,
		"agenttypes":     AgentTypes,
		"fleet":          Fleet,
		"alive":          Alive,
		"shutdown":       Shutdown,
		"messages":       Messages,
		"workspace":      Workspace,
		"events":         Events,
		"embed":          Embed,
		"toolcallback":   ToolCallback,
		"sandbox":        Sandbox,
		"model":          Model,
		"jobs":           Jobs,
		routes.JobWorker: JobWorker,
	}
}
