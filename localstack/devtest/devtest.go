// Package devtest is the one harness for tests that run the whole system on a
// dev server: the system tests (localstack/systemtest), the Go client's and
// the examples'. A TestMain calls Main, which builds the agent the sandboxes
// run and brings up the local AWS, and each test calls Start for a server on
// its own environment, seeded with the fixtures and AppKey, with its own copy
// of the guardrails. Every answer the server gives is checked against the
// API's document (package apitest) and every AWS call a function's code makes
// against its declared access (package access): either failing fails the
// test.
package devtest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/api/apitest"
	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/localstack/emulators"
	"github.com/remote-agents/remote-agents/localstack/syncbuf"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/launch/process"
)

// AppKey is the app key the servers are seeded with.
const AppKey = "rak_test_app_key_for_devserver_integration_tests"

// E2BKey is the E2B API key the servers are seeded with: an app key of
// AppKey's tenant.
const E2BKey = "e2b_7e57000000000000000000000000000000000001"

var (
	root     string
	agentBin string
)

// Main builds the agent, runs m against a local AWS, and exits.
func Main(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// From the working directory (a test runs in its package's folder), not
	// from this file's path: a -trimpath build has none.
	var err error
	if root, err = emulators.FindRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "ra-devtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// make test builds the agent once (with -race) and names it
	// (RA_AGENT_BIN): every package of end-to-end tests building it at once
	// would compile it as many times. Otherwise built here as make builds
	// dist/agent (no cgo, -trimpath), the build make bench's tests and the
	// functions' zips share.
	if agentBin = os.Getenv("RA_AGENT_BIN"); agentBin != "" {
		if !filepath.IsAbs(agentBin) {
			agentBin = filepath.Join(root, agentBin)
		}
		if _, err := os.Stat(agentBin); err != nil {
			fmt.Fprintf(os.Stderr, "RA_AGENT_BIN: %v\n", err)
			return 1
		}
		return awstest.Run(m)
	}
	agentBin = filepath.Join(dir, "agent")
	build := exec.Command("go", "build", "-trimpath", "-o", agentBin, "./sandbox/cmd/agent")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build agent: %v\n%s", err, out)
		return 1
	}
	return awstest.Run(m)
}

// EnvSandboxProfile names the sandbox profile (process.Options.Profile)
// of every stack a test starts without WithSandboxProfile: make
// test-fargate sets it to "fargate". Not RA_SANDBOX_PROFILE, which a
// developer may have set for make dev.
const EnvSandboxProfile = "RA_TEST_SANDBOX_PROFILE"

// sandboxEnv is what the tests' sandboxes get beside the platform's
// variables: the scripted model, and the race detector's settings (make
// test's agent is race-built, and exits at once with its GORACE).
func sandboxEnv() []string {
	env := []string{"RA_LLM_PROVIDER=scripted"}
	if v, ok := os.LookupEnv("GORACE"); ok {
		env = append(env, "GORACE="+v)
	}
	return env
}

// Option changes a server's options.
type Option func(*devserver.Options)

// WithConfig lets f change the platform's remote_agents configuration.
func WithConfig(f func(*config.RemoteAgents)) Option {
	return func(o *devserver.Options) { f(&o.Config.RemoteAgents) }
}

// WithSandbox runs sandboxes with command (Agent is the agent binary).
func WithSandbox(command ...string) Option {
	return func(o *devserver.Options) { o.SandboxCommand = command }
}

// WithSandboxProfile runs sandboxes with the rights of profile
// (process.ProfileFargate: a Fargate task's).
func WithSandboxProfile(profile string) Option {
	return func(o *devserver.Options) { o.SandboxProfile = profile }
}

// WithSandboxImage runs sandboxes' agent in the image whose root
// filesystem is rootfs (make image; process.Options.Rootfs).
func WithSandboxImage(rootfs string) Option {
	return func(o *devserver.Options) {
		o.SandboxRootfs, o.SandboxCommand = rootfs, []string{process.ImageAgent, "sandbox"}
	}
}

// WithPublicWebhooksOnly refuses webhook endpoints on loopback, as the
// platform does on AWS.
func WithPublicWebhooksOnly() Option {
	return func(o *devserver.Options) { o.WebhooksPublicOnly = true }
}

// WithoutEgressIsolation launches sandboxes as a machine that cannot cut
// them off from the network does: those whose egress policy is not open
// do not start.
func WithoutEgressIsolation() Option {
	return func(o *devserver.Options) { o.NoEgressIsolation = true }
}

// WithCreationTimeout sets how long a create waits for the agent.
func WithCreationTimeout(d time.Duration) Option {
	return func(o *devserver.Options) { o.Config.CreationTimeout = d }
}

// WithSandboxProxy serves the sandbox proxy (Server.SandboxProxyURL).
func WithSandboxProxy() Option {
	return func(o *devserver.Options) { o.SandboxProxyAddr = "127.0.0.1:0" }
}

// WithHandler puts wrap between the API document's checks and the routes:
// what it answers is checked too.
func WithHandler(wrap func(http.Handler) http.Handler) Option {
	return func(o *devserver.Options) {
		outer := o.Wrap
		if outer == nil {
			o.Wrap = wrap
			return
		}
		o.Wrap = func(h http.Handler) http.Handler { return outer(wrap(h)) }
	}
}

// Agent is the agent binary the sandboxes run (built by Main).
func Agent() string { return agentBin }

// Stack is a running dev server and what a test may reach beside its API.
type Stack struct {
	*devserver.Server
	// Name is the environment (RA_ENV) its resources are named for.
	Name string
	// Guardrails is the path of its own copy of the platform's guardrails.
	Guardrails string
	// Work is its working directory (sandboxes' folders and logs).
	Work string

	logs *syncbuf.Buffer
}

// Logs returns the server's log lines (JSON) written so far.
func (s *Stack) Logs() string { return s.logs.String() }

// Start runs a dev server for t, closed when t ends. An answer not as the
// API's document describes (not checked for a benchmark), or an AWS call
// outside a function's declared access, fails t; a failed t logs the
// server's logs.
func Start(t testing.TB, opts ...Option) *Stack {
	t.Helper()
	work := t.TempDir()
	// Sandboxes' tools run as another user than the test's (the fargate
	// profile's): they must reach their folders in it, as in .cache/dev.
	for _, d := range []string{filepath.Dir(work), work} {
		if err := os.Chmod(d, 0o755); err != nil { //nolint:gosec // folders, searched by the tools' user
			t.Fatal(err)
		}
	}
	guardrails := filepath.Join(work, "platform-guardrails.md")
	shipped, err := os.ReadFile(filepath.Join(root, "data", "platform-guardrails.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(guardrails, shipped, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.PlatformDefaults()
	cfg.GuardrailsPath = guardrails
	// Long enough for a create on a loaded 2-core machine running the
	// suites at once (API Gateway allows 29 s); tests of the 408 set
	// their own.
	cfg.CreationTimeout = 25 * time.Second
	logs := &syncbuf.Buffer{}
	o := devserver.Options{
		Addr:           "127.0.0.1:0",
		Env:            awstest.UniqueEnv(t),
		Config:         cfg,
		SandboxCommand: []string{agentBin, "sandbox"},
		// make test-fargate runs suites with sandboxes of a Fargate task's
		// rights (process.ProfileFargate) unless a test says otherwise.
		SandboxProfile: os.Getenv(EnvSandboxProfile),
		// A sandbox uses only the model it is given, the scripted one included.
		SandboxEnv: sandboxEnv(),
		WorkDir:    work,
		SeedDir:    filepath.Join(root, "localstack", "seed"),
		AppKey:     AppKey,
		E2BKey:     E2BKey,
		Log:        slog.New(slog.NewJSONHandler(logs, nil)),
	}
	// Every AWS call a function's code makes must be one its declared access
	// (package access, what the CDK stack grants) allows.
	denied := &callSet{seen: map[devserver.AWSCall]bool{}}
	o.Audit = func(c devserver.AWSCall) {
		if !devserver.Allowed(c) {
			denied.add(c)
		}
	}
	// Every answer, the browser's and the sandboxes' included, must be what
	// the API's document (api/openapi.json) describes; a benchmark measures
	// the platform, not these checks (a third of the CPU of a create).
	var validator *apitest.Validator
	if _, bench := t.(*testing.B); !bench {
		if validator, err = apitest.New(); err != nil {
			t.Fatal(err)
		}
		o.Wrap = validator.Middleware
		// Tests look at what a sandbox left in its folders; a benchmark's
		// ended sandboxes free their disk, as the dev server's do.
		o.KeepSandboxFolders = true
	}
	for _, opt := range opts {
		opt(&o)
	}
	srv, err := devserver.Start(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("close dev server: %v", err)
		}
		for _, p := range validator.Problems() {
			t.Errorf("not as api/openapi.json describes: %s", p)
		}
		for _, c := range denied.list() {
			t.Errorf("function %s did %s on %q (item %q), which its declared access (shared/access) does not allow", c.Function, c.Action, c.Resource, c.Key)
		}
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	})
	return &Stack{Server: srv, Name: o.Env, Guardrails: guardrails, Work: work, logs: logs}
}

// callSet collects AWS calls from concurrent handlers.
type callSet struct {
	mu   sync.Mutex
	seen map[devserver.AWSCall]bool
}

func (c *callSet) add(call devserver.AWSCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[call] = true
}

func (c *callSet) list() []devserver.AWSCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []devserver.AWSCall
	for call := range c.seen {
		out = append(out, call)
	}
	return out
}
