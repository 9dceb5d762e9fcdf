package devserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/api/apitest"
	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/shared/config"
)

// agentBin is the agent binary the sandboxes run, built once for the package.
var agentBin string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ra-agent-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	agentBin = filepath.Join(dir, "agent")
	build := exec.Command("go", "build", "-o", agentBin, "../../sandbox/cmd/agent")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build agent: %v\n%s", err, out)
		return 1
	}
	return awstest.Run(m)
}

const appKey = "rak_test_app_key_for_devserver_integration_tests"

// lockedBuffer collects log output from concurrent goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
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

type stack struct {
	t          testing.TB
	srv        *devserver.Server
	env        string
	guardrails string
	logs       *lockedBuffer
	work       string
}

type option func(*devserver.Options)

func withConfig(f func(*config.RemoteAgents)) option {
	return func(o *devserver.Options) { f(&o.Config.RemoteAgents) }
}

func withSandbox(command ...string) option {
	return func(o *devserver.Options) { o.SandboxCommand = command }
}

// start runs a dev server on its own environment, with its own copy of the
// guardrails, seeded with the fixtures and appKey.
func start(t testing.TB, opts ...option) *stack {
	t.Helper()
	work := t.TempDir()
	guardrails := filepath.Join(work, "platform-guardrails.md")
	shipped, err := os.ReadFile("../../data/platform-guardrails.md")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(guardrails, shipped, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.PlatformDefaults()
	cfg.GuardrailsPath = guardrails
	cfg.CreationTimeout = 10 * time.Second
	logs := &lockedBuffer{}
	o := devserver.Options{
		Addr:           "127.0.0.1:0",
		Env:            awstest.UniqueEnv(t),
		Config:         cfg,
		SandboxCommand: []string{agentBin, "sandbox"},
		// A sandbox uses only the model it is given, the scripted one included.
		SandboxEnv: []string{"RA_LLM_PROVIDER=scripted"},
		WorkDir:    work,
		SeedDir:    "../seed",
		AppKey:     appKey,
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
	// Every answer the tests get, the browser's and the sandboxes' included,
	// must be what the API's document (api/openapi.json) describes.
	validator, err := apitest.New()
	if err != nil {
		t.Fatal(err)
	}
	o.Wrap = validator.Middleware
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
	return &stack{t: t, srv: srv, env: o.Env, guardrails: guardrails, logs: logs, work: work}
}

type reply struct {
	status  int
	body    map[string]any
	raw     string
	headers http.Header
}

func (r reply) str(key string) string {
	s, _ := r.body[key].(string)
	return s
}

// call sends one request; body may be a string (sent as is) or a value (JSON).
func (s *stack) call(method, path, bearer string, body any, headers ...string) reply {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.srv.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	r := reply{status: res.StatusCode, raw: string(raw), headers: res.Header}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func createBody(prompt string) map[string]any {
	return map[string]any{"project_name": "demo", "persona_slug": "assistant", "initial_prompt": prompt}
}

func (s *stack) create(body any, headers ...string) reply {
	s.t.Helper()
	return s.call(http.MethodPost, "/api/remote_agents/create", appKey, body, headers...)
}

// mustCreate creates a ready agent and returns its id and token.
func (s *stack) mustCreate() (string, string) {
	s.t.Helper()
	r := s.create(createBody("Hello"))
	if r.status != http.StatusOK {
		s.t.Fatalf("create: %d %s", r.status, r.raw)
	}
	return r.str("agent_id"), r.str("session_token")
}

func (s *stack) alive(id, tok string) reply {
	s.t.Helper()
	return s.call(http.MethodGet, "/api/remote_agents/"+id+"/alive", tok, nil)
}

func (s *stack) shutdown(id, tok string) reply {
	s.t.Helper()
	return s.call(http.MethodPost, "/api/remote_agents/"+id+"/shutdown", tok, nil)
}

// wantError checks an error envelope.
func wantError(t *testing.T, r reply, status int, code string) {
	t.Helper()
	if r.status != status || r.str("error_code") != code {
		t.Errorf("got %d %s, want %d %s", r.status, r.raw, status, code)
		return
	}
	if _, ok := r.body["retryable"].(bool); !ok || r.str("message") == "" || r.body["status"] != float64(status) {
		t.Errorf("incomplete envelope: %s", r.raw)
	}
}

// eventually polls cond every 200 ms until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
