package doccommands

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/client"
	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/localstack/devtest"
	"github.com/remote-agents/remote-agents/localstack/seed"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// The documentation's commands are written for make dev: its address, its
// app key and its region.
const (
	devURL    = "http://127.0.0.1:8080"
	devRegion = "us-east-1"
)

// start runs a dev server seeded with make dev's app key.
func start(t *testing.T) *devtest.Stack {
	t.Helper()
	return devtest.Start(t, func(o *devserver.Options) { o.AppKey = seed.DefaultAppKey })
}

// block returns the shell block of page (from the repository's root) marked
// as run by name.
func block(t *testing.T, page, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", page))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	mark := "<!-- run by " + name + " in localstack/doccommands -->"
	var (
		body   strings.Builder
		marked bool
		in     bool
		sc     = bufio.NewScanner(f)
	)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == mark:
			marked = true
		case marked && !in && (line == "```sh" || line == "```bash"):
			in = true
		case in && line == "```":
			return body.String()
		case in:
			body.WriteString(line + "\n")
		case marked:
			t.Fatalf("%s: %s is not followed by a shell block (%q)", page, mark, line)
		}
	}
	t.Fatalf("%s has no block marked %s", page, mark)
	return ""
}

// run runs script with bash in dir, against srv: make dev's address and
// region become srv's. It returns what the script wrote; a failing command
// fails t.
func run(t *testing.T, srv *devtest.Stack, dir, script string, env ...string) string {
	t.Helper()
	script = strings.ReplaceAll(script, devURL, srv.URL)
	script = strings.ReplaceAll(script, devRegion, srv.Env.AWS.Region)
	cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if _, err := exec.LookPath("uuidgen"); err != nil {
		// The docs name uuidgen (util-linux, macOS) as a prerequisite; where
		// it is missing, the kernel's UUIDs stand in for it.
		bin := t.TempDir()
		if err := os.WriteFile(filepath.Join(bin, "uuidgen"), []byte("#!/bin/sh\ncat /proc/sys/kernel/random/uuid\n"), 0o755); err != nil { //nolint:gosec // an executable, on purpose
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", err, script, out.String(), errOut.String())
	}
	t.Logf("script:\n%s\nstdout:\n%s", script, out.String())
	return out.String()
}

// contains fails t for each of wants out lacks.
func contains(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// agent creates an agent through the Go client.
func agent(t *testing.T, srv *devtest.Stack) (id, token string) {
	t.Helper()
	c, err := client.New(srv.URL, seed.DefaultAppKey)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Create(t.Context(), client.CreateRequest{ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "Hello!"})
	if err != nil {
		t.Fatal(err)
	}
	return a.AgentID, a.SessionToken
}

// README.md's first calls: create, alive, the embed URL, shutdown.
func TestReadmeFirstCalls(t *testing.T) {
	srv := start(t)
	out := run(t, srv, t.TempDir(), block(t, "README.md", t.Name()))
	contains(t, out, `"agent_id"`, `"session_token"`, `"alive":true`, srv.URL+"/embed/", "shutdown_initiated")
}

// docs/api.md's fleet calls: list the live agents, kill one.
func TestAPIFleetCalls(t *testing.T) {
	srv := start(t)
	id, _ := agent(t, srv)
	out := run(t, srv, t.TempDir(), block(t, "docs/api.md", t.Name()), "AGENT_ID="+id)
	contains(t, out, `"agents"`, id, `"killed"`)
}

// docs/api.md's workspace tool call: read a file in the agent's workspace.
func TestAPIWorkspaceToolCall(t *testing.T) {
	srv := start(t)
	id, token := agent(t, srv)
	out := run(t, srv, t.TempDir(), block(t, "docs/api.md", t.Name()), "AGENT_ID="+id, "TOKEN="+token)
	contains(t, out, `"request_id":"ls-1"`, `"tool":"ls"`, `"is_error":false`)
}

// docs/agent-types.md's warm pool calls: a type, its pool of 2, its state.
func TestAgentTypeWarmPoolCalls(t *testing.T) {
	srv := start(t)
	out := run(t, srv, t.TempDir(), block(t, "docs/agent-types.md", t.Name()))
	contains(t, out, `"id":"mine"`, `"warm_pool_size":2`, `"warm_pool"`)
}

// docs/jobs.md's orchestrator calls, signed with the dev orchestrator's key:
// a profile, a job, its status, logs and outputs, its cancel.
func TestJobsCalls(t *testing.T) {
	srv := start(t)
	out := run(t, srv, t.TempDir(), block(t, "docs/jobs.md", t.Name()))
	contains(t, out, `"name":"Writer"`, `"status"`, `"outputs"`, "event: end\ndata: {\"job_id\"")
}

// docs/local.md's call of the LocalStack variant: create at the create
// function's URL from the deploy's outputs file (here the dev server's
// address, which serves the same routes).
func TestLocalStackVariantCall(t *testing.T) {
	srv := start(t)
	dir := t.TempDir()
	outputs := filepath.Join(dir, "infra", "cdk.out", "outputs-localstack-dev.json")
	if err := os.MkdirAll(filepath.Dir(outputs), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outputs, []byte(`{"RemoteAgents-dev":{"CreateUrl":"`+srv.URL+`/"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out := run(t, srv, dir, block(t, "docs/local.md", t.Name()))
	contains(t, out, `"agent_id"`, `"session_token"`)
}

// docs/api.md's webhook calls: register an endpoint, read its log, replay an
// agent's stream.
func TestAPIWebhookCalls(t *testing.T) {
	srv := start(t)
	id, _ := agent(t, srv)
	out := run(t, srv, t.TempDir(), block(t, "docs/api.md", t.Name()), "AGENT_ID="+id)
	contains(t, out, `"id":"wh_`, `"secret":"whsec_`, `"deliveries"`, `{"agents":1}`)
}

// docs/e2b.md's quickstart: its exports, then its script with the SDK
// installed as `npm i e2b` would (the pinned 2.51), unchanged.
func TestE2BQuickstart(t *testing.T) {
	// A create may wait 29 s, as a deployment's may (conformance_test.go).
	srv := devtest.Start(t, devtest.WithSandboxProxy(), devtest.WithCreationTimeout(29*time.Second), func(o *devserver.Options) { o.E2BKey = seed.DefaultE2BKey })
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	sdk, err := filepath.Abs(filepath.Join("..", "node_modules", "e2b-2.51"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sdk, filepath.Join(dir, "node_modules", "e2b")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "quickstart.mjs"), []byte(fenced(t, "docs/e2b.md", "js")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		logs, _ := filepath.Glob(filepath.Join(srv.Work, "sandboxes", "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("sandbox log %s:\n%s", l, b)
		}
	})
	exports := strings.ReplaceAll(block(t, "docs/e2b.md", t.Name()), "http://127.0.0.1:49983", srv.SandboxProxyURL)
	out := run(t, srv, dir, exports+"node quickstart.mjs\n")
	contains(t, out, "hello\n", "1\n", "2\n", "3\n", "a.txt")
}

// fenced returns the first ```lang block of page.
func fenced(t *testing.T, page, lang string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", page))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "\n```"+lang+"\n")
	body, _, closed := strings.Cut(rest, "\n```\n")
	if !ok || !closed {
		t.Fatalf("%s has no ```%s block", page, lang)
	}
	return body + "\n"
}
