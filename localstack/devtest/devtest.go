// Package devtest runs a dev server for the tests of packages outside the dev
// server's own (the Go client, the examples): a TestMain calls Main, which
// builds the agent the sandboxes run and brings up the local AWS, and each
// test calls Start for a server on its own environment, seeded with the
// fixtures and AppKey, whose every answer is checked against the API's
// document (package apitest).
package devtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/api/apitest"
	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/shared/config"
)

// AppKey is the app key the servers are seeded with.
const AppKey = "rak_devtest_app_key_for_client_tests"

var (
	root     = repoRoot()
	agentBin string
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Main builds the agent, runs m against a local AWS, and exits.
func Main(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ra-devtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	agentBin = filepath.Join(dir, "agent")
	build := exec.Command("go", "build", "-o", agentBin, "./sandbox/cmd/agent")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build agent: %v\n%s", err, out)
		return 1
	}
	return awstest.Run(m)
}

// Option changes a server's options.
type Option func(*devserver.Options)

// WithSandbox runs sandboxes with command (Agent is the agent binary).
func WithSandbox(command ...string) Option {
	return func(o *devserver.Options) { o.SandboxCommand = command }
}

// WithCreationTimeout sets how long a create waits for the agent.
func WithCreationTimeout(d time.Duration) Option {
	return func(o *devserver.Options) { o.Config.CreationTimeout = d }
}

// WithHandler puts wrap between the API document's checks and the routes:
// what it answers is checked too.
func WithHandler(wrap func(http.Handler) http.Handler) Option {
	return func(o *devserver.Options) {
		outer := o.Wrap
		o.Wrap = func(h http.Handler) http.Handler { return outer(wrap(h)) }
	}
}

// Agent is the agent binary the sandboxes run (built by Main).
func Agent() string { return agentBin }

// Start runs a dev server for t, closed when t ends; the API document's
// checks fail t.
func Start(t testing.TB, opts ...Option) *devserver.Server {
	t.Helper()
	work := t.TempDir()
	cfg := config.PlatformDefaults()
	cfg.GuardrailsPath = filepath.Join(root, "data", "platform-guardrails.md")
	cfg.CreationTimeout = 10 * time.Second
	validator, err := apitest.New()
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	o := devserver.Options{
		Addr:           "127.0.0.1:0",
		Env:            awstest.UniqueEnv(t),
		Config:         cfg,
		SandboxCommand: []string{agentBin, "sandbox"},
		SandboxEnv:     []string{"RA_LLM_PROVIDER=scripted"},
		WorkDir:        work,
		SeedDir:        filepath.Join(root, "localstack", "seed"),
		AppKey:         AppKey,
		Wrap:           validator.Middleware,
		Log:            slog.New(slog.NewJSONHandler(logs, nil)),
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
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	})
	return srv
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

var _ io.Writer = (*lockedBuffer)(nil)

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
