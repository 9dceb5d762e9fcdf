// Package devserver runs the whole system on one machine: it serves the route
// table over HTTP by turning each request into the API Gateway event the Lambda
// function would get and calling the same handler in-process, and it polls the jobs,
// tools and webhooks queues and hands their workers SQS batches, honouring partial
// batch failures, and the events table's stream to the webhooks function, like
// event source mappings. Sandboxes are local processes.
package devserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/remote-agents/remote-agents/api"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/bootstrap"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/launch/process"
	"github.com/remote-agents/remote-agents/shared/queue"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/sandboxproxy"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/secrets"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sigv4"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/e2bservice"
	"github.com/remote-agents/remote-agents/shared/wiring/functionset"
	"github.com/remote-agents/remote-agents/shared/wiring/jobservice"
)

// Options configure a dev server.
type Options struct {
	// Addr to listen on; "127.0.0.1:0" picks a free port.
	Addr string
	// SandboxProxyAddr, if set, is where the sandbox proxy listens (the E2B
	// SDKs' E2B_SANDBOX_URL); "127.0.0.1:0" picks a free port.
	SandboxProxyAddr string
	// Env names the resources (RA_ENV); "" means dev.
	Env string
	// Config is the platform configuration; PublicBaseURL and GatewayURL
	// default to the server's own URL.
	Config config.Platform
	// SandboxCommand runs a sandbox (see process.CommandFromEnv).
	SandboxCommand []string
	// SandboxProfile is the rights sandboxes run with (process.Options.Profile,
	// RA_SANDBOX_PROFILE): "" the dev server's own, "fargate" a Fargate
	// task's.
	SandboxProfile string
	// SandboxRootfs, if set, is the root filesystem of the image sandboxes
	// run in (process.Options.Rootfs, RA_SANDBOX_ROOTFS; make image);
	// SandboxCommand is then the image's.
	SandboxRootfs string
	// SandboxEnv is added to every sandbox's environment (model settings); a
	// sandbox inherits no AWS_ or RA_ variable, and no model provider's key,
	// otherwise.
	SandboxEnv []string
	// KeepSandboxFolders keeps an ended sandbox's workspace and private
	// folder (process.Options.KeepEnded), for tests that look at what it
	// left; by default they go with it.
	KeepSandboxFolders bool
	// ModelKeys reads the model providers' keys the model gateway (the dev
	// server itself) puts on sandboxes' model calls, by their usual variables
	// (ANTHROPIC_API_KEY…); nil: the process's environment. Sandboxes never
	// hold them.
	ModelKeys func(name string) (string, bool)
	// Metered, if set, hears the usage of each model call once it is added to
	// its session (tests).
	Metered func(sessionID string, u session.Usage)
	// WorkDir holds sandbox working directories and logs.
	WorkDir string
	// SeedDir holds the fixtures loaded at start; "" loads none.
	SeedDir string
	// AppKey is the development app key seeded into the registry; "" seeds none.
	AppKey string
	// E2BKey is the development E2B API key seeded beside it (an app key of
	// the same tenant, shaped as the E2B SDKs want); "" seeds none.
	E2BKey string
	// OrchestratorKeyID and OrchestratorSecret sign the orchestrator's calls
	// to the /internal/ routes; "" the defaults (DefaultOrchestratorKeyID).
	OrchestratorKeyID, OrchestratorSecret string
	// WebhooksPublicOnly refuses webhook endpoints on loopback, as on AWS;
	// otherwise the dev server lets them be (RA_WEBHOOKS_LOOPBACK):
	// receivers on the same machine.
	WebhooksPublicOnly bool
	// NoEgressIsolation launches sandboxes as a machine without network
	// namespaces does (not root, not Linux): one whose egress policy is
	// not open does not start (launch.ErrIsolationUnavailable).
	NoEgressIsolation bool
	// Pollers is how many jobs-queue consumers run at once (default 4).
	Pollers int
	// SweepInterval is how often the dev server queues a sweep, as the
	// stack's schedule does on AWS (DefaultSweepInterval when 0); the sweep
	// also replenishes the warm pool.
	SweepInterval time.Duration
	// NoPoolRefillOnClaim leaves refilling the warm pool to the sweep (tests
	// that count warm claims exactly).
	NoPoolRefillOnClaim bool
	// Audit, if set, hears every AWS call each function's code makes (see
	// AWSCall), to check the functions' declared access against.
	Audit func(AWSCall)
	// Wrap, if set, wraps the routes' handler: it sees every request to a
	// route, and its answer (tests check them against the API's document).
	Wrap func(http.Handler) http.Handler
	// OnAppend, if set, hears the events appended to an agent with
	// viewers, once stored and before they are pushed to them (benchmarks
	// time the push from it).
	OnAppend func(id string, events []session.Event)
	Log      *slog.Logger
}

// Server is a running dev server.
type Server struct {
	URL string
	// SandboxProxyURL is the sandbox proxy's ("" when it is not served).
	SandboxProxyURL string
	// Env is what the functions were built from: their stores and clients.
	Env      *wiring.Env
	Launcher *process.Launcher

	http     *http.Server
	proxy    *http.Server
	health   *health
	push     *pushHub
	socket   httpapi.SocketHandler
	internal *iamAuth
	table    []httpapi.Route
	// workers are the functions that serve no route, by name
	// (routes.Workers).
	workers map[string]wiring.Function
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	// kick is signalled when a message is sent to the jobs queue; hooks
	// when one is sent to the webhooks queue; written when an event is
	// written to the events table.
	kick, hooks, written chan struct{}
}

// Start bootstraps the environment, seeds it, and serves.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if o.Pollers <= 0 {
		o.Pollers = 4
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("devserver: listen: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String()}
	if err := s.setup(ctx, o); err != nil {
		_ = ln.Close()
		return nil, err
	}
	pollCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	g := &gateway{routes: s.table, closing: pollCtx, functions: map[string]string{}, internal: s.internal}
	for _, r := range routes.All() {
		g.functions[r.Key()] = r.Function
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", s.health)
	mux.HandleFunc("GET /openapi.json", serveOpenAPI)
	s.push = newPushHub(s.socket, pollCtx, o.Log)
	mux.HandleFunc("GET "+PushPath, s.push.serveSocket)
	mux.HandleFunc("POST /@connections/{connectionId}", s.push.post)
	mux.HandleFunc("DELETE /@connections/{connectionId}", s.push.remove)
	var routesHandler http.Handler = g
	if o.Wrap != nil {
		routesHandler = o.Wrap(g)
	}
	mux.Handle("/", routesHandler)
	// Like API Gateway: a request is read within 30 s (streams are not bounded:
	// only their reading is), and a client that goes away is no error of ours.
	s.http = &http.Server{Handler: canonicalPaths(mux), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(o.Log.Handler(), slog.LevelDebug)}
	jobsQueue, err := s.Env.JobsQueue(ctx)
	if err != nil {
		return nil, err
	}
	s.health.queueURL = jobsQueue.URL()
	toolsQueue, err := s.Env.ToolsQueue(ctx)
	if err != nil {
		return nil, err
	}
	jobService, err := jobservice.Service(ctx, s.Env)
	if err != nil {
		return nil, err
	}
	// What a schedule does on AWS: the jobs' sweep (the outbox's leftovers,
	// running jobs whose sandbox is gone).
	s.wg.Go(func() { sweepJobs(pollCtx, jobService, o.Log) })
	// goaws looks for messages every 100 ms of a long poll, where SQS
	// answers one at once: a poller kicked by each send to the jobs queue
	// receives without waiting, as Lambda's event source mapping would.
	jobworker, hooks := s.workers[routes.JobWorker], s.workers[routes.Webhooks]
	for range 2 {
		s.wg.Go(func() { pollKicked(pollCtx, jobsQueue, s.kick, jobworker, o.Log) })
	}
	for range o.Pollers {
		s.wg.Go(func() { poll(pollCtx, jobsQueue, jobworker, o.Log) })
		s.wg.Go(func() { poll(pollCtx, toolsQueue, jobworker, o.Log) })
	}
	webhooksQueue, err := s.Env.WebhooksQueue(ctx)
	if err != nil {
		return nil, err
	}
	// Webhooks: the events table's stream, as Lambda's event source
	// mapping reads it, and the webhooks queue.
	s.wg.Go(func() { followStream(pollCtx, s.Env, hooks, s.written, o.Log) })
	s.wg.Go(func() { pollKicked(pollCtx, webhooksQueue, s.hooks, hooks, o.Log) })
	for range 2 {
		s.wg.Go(func() { poll(pollCtx, webhooksQueue, hooks, o.Log) })
	}
	s.wg.Go(func() { schedule(pollCtx, jobsQueue, cmp.Or(o.SweepInterval, DefaultSweepInterval), o.Log) })
	s.wg.Go(func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Log.Error("devserver: serve", slog.String("error", err.Error()))
		}
	})
	if o.SandboxProxyAddr != "" {
		if err := s.serveSandboxProxy(ctx, o.SandboxProxyAddr, o.Log); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// serveSandboxProxy serves the sandbox proxy on addr, in-process: it
// dials each sandbox's envd socket.
func (s *Server) serveSandboxProxy(ctx context.Context, addr string, log *slog.Logger) error {
	// The sandbox API's key: the e2b function was built in the same Env.
	tokens, err := e2bservice.Tokens(ctx, s.Env)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("devserver: sandbox proxy: listen: %w", err)
	}
	s.SandboxProxyURL = "http://" + ln.Addr().String()
	p := sandboxproxy.New(sandboxproxy.Options{Store: s.Env.SessionStore(), Dialer: processSandboxes{s.Launcher}, Tokens: tokens, Log: log})
	s.proxy = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	s.wg.Go(func() {
		if err := s.proxy.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("devserver: sandbox proxy", slog.String("error", err.Error()))
		}
	})
	return nil
}

// processSandboxes dials the envd of process sandboxes: the socket of the
// session's launch, or of the warm pool sandbox it claimed. The proxy asks
// for envd's port alone, and reaches the sandbox's other ports through it.
type processSandboxes struct{ l *process.Launcher }

func (p processSandboxes) DialSandbox(ctx context.Context, sess session.Session, port int) (net.Conn, error) {
	if port != sandboxwire.EnvdPort {
		return nil, fmt.Errorf("port %d: only envd's is served", port)
	}
	sock := p.l.EnvdSocket(sess.ID, sess.Generation)
	if sess.PoolSandbox != "" {
		sock = p.l.EnvdSocket(sess.PoolSandbox, 1)
	}
	return sandboxwire.DialSocket(ctx, sock)
}

func (s *Server) setup(ctx context.Context, o Options) error {
	cfg := o.Config
	if cfg.PublicBaseURL == "" {
		cfg.PublicBaseURL = s.URL
	}
	if cfg.GatewayURL == "" {
		cfg.GatewayURL = s.URL
	}
	if cfg.Model.GatewayURL == "" {
		cfg.Model.GatewayURL = cfg.GatewayURL
	}
	// The push channel is the dev server's own (PushPath, @connections).
	if cfg.Push.URL == "" {
		cfg.Push.URL = "ws" + strings.TrimPrefix(s.URL, "http") + PushPath
	}
	if cfg.Push.Endpoint == "" {
		cfg.Push.Endpoint = s.URL
	}
	cfg.Env = cmp.Or(o.Env, cfg.Env, "dev")
	cfg.WebhooksLoopback = !o.WebhooksPublicOnly
	cfg.OrchestratorRoleARN = cmp.Or(cfg.OrchestratorRoleARN, config.DevOrchestratorRoleARN)
	env := cfg.Env
	set, err := resources.For(env)
	if err != nil {
		return fmt.Errorf("devserver: %w", err)
	}
	awsCfg, err := awsconfig.Load(ctx)
	if err != nil {
		return fmt.Errorf("devserver: %w", err)
	}
	clients := bootstrap.ClientsFor(awsCfg)
	if _, err := bootstrap.Run(ctx, clients, set); err != nil {
		return fmt.Errorf("devserver: bootstrap %s: %w", env, err)
	}
	s.health = &health{clients: clients, table: set.Sessions.Name, bucket: set.Bucket.Name, log: o.Log}
	if o.Audit != nil {
		awsCfg.APIOptions = append(awsCfg.APIOptions, auditor(set, o.Audit))
	}
	s.kick, s.hooks, s.written = make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	awsCfg.APIOptions = append(awsCfg.APIOptions, kicker(set.JobsQueue.Name, s.kick), kicker(set.WebhooksQueue.Name, s.hooks),
		writeKicker(set.Events.Name, s.written))
	e, err := wiring.New(cfg, awsCfg, o.Log)
	if err != nil {
		return fmt.Errorf("devserver: %w", err)
	}
	e.KeyLookup, e.Metered = o.ModelKeys, o.Metered
	// Pool sandboxes of another sandbox command are retired.
	e.SandboxImage, e.NoPoolRefillOnClaim = "process:"+strings.Join(o.SandboxCommand, " "), o.NoPoolRefillOnClaim
	// The dev stack runs jobs with the scripted model too.
	e.AllowScripted = true
	// Apps' secrets live in the dev server's memory (on AWS, Secrets
	// Manager): no file a sandbox could read holds them.
	e.SecretStore = secrets.NewMemory()
	keyID, secret := OrchestratorCredentialsFromEnv(nil)
	keyID, secret = cmp.Or(o.OrchestratorKeyID, keyID), cmp.Or(o.OrchestratorSecret, secret)
	keys := []sigv4.Credentials{{KeyID: keyID, Secret: secret}}
	s.internal = &iamAuth{roleARN: cfg.OrchestratorRoleARN,
		verifier: &sigv4.Verifier{Region: awsCfg.Region, Service: "execute-api", Keys: keys},
		streams:  &sigv4.Verifier{Region: awsCfg.Region, Service: "lambda", Keys: keys}}
	s.Env = e
	if hear := o.OnAppend; hear != nil {
		st := e.SessionStore()
		push := st.OnAppend
		st.OnAppend = func(ctx context.Context, id string, viewers []string, events []session.Event) {
			hear(id, events)
			if push != nil {
				push(ctx, id, viewers, events)
			}
		}
	}
	if o.SeedDir != "" || o.AppKey != "" {
		if err := Seed(ctx, e.Registry(), o.SeedDir, o.AppKey); err != nil {
			return err
		}
	}
	if o.E2BKey != "" {
		if err := SeedE2BKey(ctx, e.Registry(), o.E2BKey); err != nil {
			return err
		}
	}
	publisher, err := e.Jobs(ctx)
	if err != nil {
		return fmt.Errorf("devserver: %w", err)
	}
	sandboxes := filepath.Join(o.WorkDir, "sandboxes")
	s.Launcher, err = process.New(process.Options{
		Command:   o.SandboxCommand,
		Profile:   o.SandboxProfile,
		Rootfs:    o.SandboxRootfs,
		Env:       o.SandboxEnv,
		Dir:       sandboxes,
		LogDir:    sandboxes,
		KeepEnded: o.KeepSandboxFolders,
		// A delegated cgroup v2 for the sandboxes' own cgroups; unset, the
		// dev server's own cgroup where it is writable v2.
		CgroupDir: os.Getenv("RA_SANDBOX_CGROUP"),
		// Sandboxes whose egress policy is not open run cut off, through
		// the egress proxy.
		Network: egressNetwork(cfg, e, o),
		OnExit: func(e launch.Exit) {
			// What EventBridge does for a stopped ECS task.
			code := e.ExitCode
			m := jobqueue.Message{Type: jobqueue.TaskState, SessionID: e.SessionID, Generation: e.Generation, SandboxRef: e.Ref, ExitCode: &code, Detail: e.Detail}
			if err := publisher.Publish(context.Background(), m, 0); err != nil {
				o.Log.Error("publish task.state", slog.String("session_id", e.SessionID), slog.String("error", err.Error()))
			}
		},
	})
	if err != nil {
		return err
	}
	if cg := s.Launcher.Cgroup(); cg != "" {
		o.Log.Info("sandboxes get cgroups (memory.max, cpu.max)", slog.String("parent", cg))
	} else {
		o.Log.Info("no writable cgroup v2: sandboxes' sizes hold as rlimits only")
	}
	e.Launcher = s.Launcher
	return s.build(ctx)
}

// build builds every function with the constructors the Lambda functions use
// (package functionset), in the order of the route table.
func (s *Server) build(ctx context.Context) error {
	builders := functionset.Builders()
	for _, name := range routes.Functions() {
		build, ok := builders[name]
		if !ok {
			return fmt.Errorf("devserver: no constructor for function %s", name)
		}
		f, err := build(ctx, s.Env)
		if err != nil {
			return fmt.Errorf("devserver: build %s: %w", name, err)
		}
		if f.Worker != nil {
			if s.workers == nil {
				s.workers = map[string]wiring.Function{}
			}
			s.workers[name] = f
			continue
		}
		if f.Socket != nil {
			s.socket = f.Socket
		}
		s.table = append(s.table, f.Routes...)
	}
	for _, name := range routes.Workers {
		if s.workers[name].Worker == nil {
			return fmt.Errorf("devserver: no worker %s", name)
		}
	}
	return nil
}

// serveOpenAPI answers the API's OpenAPI 3.1 document (package api).
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(api.OpenAPI())
}

// RefusePush makes the push channel refuse new connections and closes the
// open ones while on (an outage of the WebSocket API: sandboxes then poll),
// and takes connections again once off.
func (s *Server) RefusePush(on bool) { s.push.refuse(on) }

// Routes returns the routes the server serves.
func (s *Server) Routes() []httpapi.Route { return slices.Clone(s.table) }

// DefaultSweepInterval is how often the dev server sweeps: a sandbox that
// stops heart-beating is lost within session.HeartbeatTimeout and this.
const DefaultSweepInterval = 10 * time.Second

// schedule queues a sweep on the jobs queue every interval, as the stack's
// EventBridge schedule does on AWS.
func schedule(ctx context.Context, q queue.Queue, every time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	body, _ := json.Marshal(map[string]jobqueue.Type{"type": jobqueue.Sweep})
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := q.Send(ctx, string(body), 0); err != nil && ctx.Err() == nil {
				log.Warn("devserver: queue a sweep", slog.String("error", err.Error()))
			}
		}
	}
}

// poll consumes a queue like a Lambda event source mapping: batches of up
// to ten for worker f, records reported as failed stay on the queue for
// redelivery.
func poll(ctx context.Context, q queue.Queue, f wiring.Function, log *slog.Logger) {
	for ctx.Err() == nil {
		receive(ctx, q, time.Second, f, log)
	}
}

// pollKicked receives from q without waiting each time kick is signalled.
func pollKicked(ctx context.Context, q queue.Queue, kick <-chan struct{}, f wiring.Function, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			receive(ctx, q, 0, f, log)
		}
	}
}

// receive receives one batch from q, waiting up to wait, and has f handle it.
func receive(ctx context.Context, q queue.Queue, wait time.Duration, f wiring.Function, log *slog.Logger) {
	msgs, err := q.Receive(ctx, queue.MaxReceive, wait)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("devserver: receive", slog.String("function", f.Name), slog.String("error", err.Error()))
			time.Sleep(time.Second)
		}
		return
	}
	if len(msgs) == 0 {
		return
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, m := range msgs {
		ev.Records[i] = events.SQSMessage{MessageId: m.ID, ReceiptHandle: m.ReceiptHandle, Body: m.Body, EventSource: "aws:sqs"}
	}
	// Receiving and deleting is the event source mapping's work; handling
	// the batch is the function's.
	res, err := f.Worker(withFunction(ctx, f.Name), ev)
	if err != nil {
		return // the whole batch is retried, as Lambda would
	}
	failed := make([]string, 0, len(res.BatchItemFailures))
	for _, f := range res.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	for _, m := range msgs {
		if slices.Contains(failed, m.ID) {
			continue
		}
		if err := q.Delete(context.WithoutCancel(ctx), m.ReceiptHandle); err != nil {
			log.Warn("devserver: delete a handled message", slog.String("function", f.Name), slog.String("message_id", m.ID), slog.String("error", err.Error()))
		}
	}
}

// Close stops serving, stops the pollers and every sandbox.
func (s *Server) Close(ctx context.Context) error {
	s.cancel() // ends the pollers and the open event streams
	err := s.http.Shutdown(ctx)
	if s.proxy != nil {
		_ = s.proxy.Close() // its streams too
	}
	s.Launcher.StopAll(5 * time.Second)
	s.wg.Wait()
	return err
}
