// Command devserver runs Remote Agents on this machine: the bundled emulators (or
// LocalStack, when AWS_ENDPOINT_URL is set), the resources, the seed fixtures, the
// route table on 127.0.0.1:$RA_PORT (default 8080) and sandboxes as processes.
//
// Environment: RA_PORT, RA_ENV, RA_CONFIG, RA_GUARDRAILS_PATH, RA_DEV_APP_KEY,
// RA_DEV_E2B_KEY, RA_E2B_SANDBOX_PORT, RA_SANDBOX_COMMAND, RA_AGENT_BIN
// (default dist/agent), and the AWS variables.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/localstack/emulators"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/launch/process"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devserver:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	cfg, err := config.Load()
	if err != nil {
		return err
	}
	model := devserver.ModelFromEnv(os.LookupEnv)
	if model.Upstream != "" && cfg.Model.Upstreams[model.Provider] == "" {
		cfg.Model.Upstreams[model.Provider] = model.Upstream
	}
	if !awsconfig.Overridden() {
		started := time.Now()
		emu, err := emulators.Start(ctx, emulators.Options{})
		if err != nil {
			return err
		}
		defer func() { _ = emu.Stop() }()
		for _, kv := range emu.Env() {
			k, v, _ := strings.Cut(kv, "=")
			_ = os.Setenv(k, v)
		}
		fmt.Fprintf(os.Stderr, "emulators ready in %.1fs: DynamoDB %s, SQS %s, S3 %s\n", time.Since(started).Seconds(), emu.DynamoDB, emu.SQS, emu.S3)
	}
	port := envOr("RA_PORT", "8080")
	appKey := envOr("RA_DEV_APP_KEY", devserver.DefaultAppKey)
	e2bKey := envOr("RA_DEV_E2B_KEY", devserver.DefaultE2BKey)
	e2bPort := envOr("RA_E2B_SANDBOX_PORT", strconv.Itoa(sandboxwire.EnvdPort))
	agent, err := filepath.Abs(envOr("RA_AGENT_BIN", filepath.Join("dist", "agent")))
	if err != nil {
		return err
	}
	work, err := filepath.Abs(envOr("RA_WORK_DIR", filepath.Join(".cache", "dev")))
	if err != nil {
		return err
	}
	toolUser, toolUserWhy := devserver.ToolUser(os.LookupEnv, os.Geteuid(), func(name string) bool { _, err := user.Lookup(name); return err == nil })
	if toolUser != "" {
		model.SandboxEnv = append(model.SandboxEnv, "RA_TOOL_USER="+toolUser)
	}
	keyID, secret := devserver.OrchestratorCredentialsFromEnv(os.LookupEnv)
	srv, err := devserver.Start(ctx, devserver.Options{
		Addr:           "127.0.0.1:" + port,
		Config:         cfg,
		SandboxCommand: sandboxCommand(agent),
		SandboxProfile: os.Getenv("RA_SANDBOX_PROFILE"),
		SandboxRootfs:  os.Getenv("RA_SANDBOX_ROOTFS"),
		SandboxEnv:     model.SandboxEnv,
		ModelKeys:      model.Keys,
		WorkDir:        work,
		SeedDir:        filepath.Join("localstack", "seed"),
		AppKey:         appKey,
		E2BKey:         e2bKey,
		// The E2B SDKs' E2B_SANDBOX_URL: every sandbox's envd.
		SandboxProxyAddr: "127.0.0.1:" + e2bPort,
		// Webhook receivers on this machine are allowed, unless
		// RA_WEBHOOKS_LOOPBACK=false says otherwise.
		WebhooksPublicOnly: os.Getenv("RA_WEBHOOKS_LOOPBACK") != "" && !cfg.WebhooksLoopback,
		Log:                log,
	})
	if err != nil {
		return err
	}
	fmt.Printf(`
Remote Agents dev server: %s   (health: %s/healthz, API description: %s/openapi.json)
Sandbox logs: %s
Agent tools run as: %s
Model: %s (RA_LLM_PROVIDER%s)%s

Create an agent:

  curl -s -X POST %s/api/remote_agents/create \
    -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \
    -d '{"project_name":"demo","persona_slug":"assistant","initial_prompt":"Hello!"}'

or from Go (package client):

  go run ./examples/quickstart -url %s -app-key %s

Or use the E2B SDK (npm i e2b; docs/e2b.md) with these three:

  export E2B_API_URL=%s/e2b
  export E2B_SANDBOX_URL=%s
  export E2B_API_KEY=%s

The orchestrator's /internal/ routes take SigV4 (service execute-api, region %s)
with the dev orchestrator's key: %s / %s
(RA_DEV_ORCHESTRATOR_KEY_ID, RA_DEV_ORCHESTRATOR_SECRET), e.g.

  curl --aws-sigv4 "aws:amz:%s:execute-api" --user %s:%s \
    -H "x-identity-id: $(uuidgen)" -H "x-context-id: $(uuidgen)" -H "x-command-id: $(uuidgen)" -H "x-plan-step-id: $(uuidgen)" \
    %s/internal/agents

Ctrl-C stops the server, its sandboxes and the emulators.
`, srv.URL, srv.URL, srv.URL, filepath.Join(work, "sandboxes"), toolUserWhy, model.Provider, modelNote(), gatewayNote(model.Provider), srv.URL, appKey, srv.URL, appKey,
		srv.URL, srv.SandboxProxyURL, e2bKey,
		srv.Env.AWS.Region, keyID, secret, srv.Env.AWS.Region, keyID, secret, srv.URL)
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Close(shutdown)
}

// modelNote says where the model setting came from.
func modelNote() string {
	if os.Getenv("RA_LLM_PROVIDER") == "" {
		return " unset: the scripted provider, which answers without a model"
	}
	return ""
}

// gatewayNote says that a hosted provider's key stays with the dev server.
func gatewayNote(provider string) string {
	if !sandboxwire.ViaGateway(provider) {
		return ""
	}
	return "\nModel calls go through this server's model gateway, with the key from its environment: sandboxes hold none."
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// sandboxCommand is RA_SANDBOX_COMMAND's, else the agent: the image's when
// sandboxes run in one (RA_SANDBOX_ROOTFS), else agent.
func sandboxCommand(agent string) []string {
	if os.Getenv("RA_SANDBOX_ROOTFS") != "" && os.Getenv("RA_SANDBOX_COMMAND") == "" {
		return []string{process.ImageAgent, "sandbox"}
	}
	return process.CommandFromEnv(agent)
}
