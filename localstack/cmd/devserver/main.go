// Command devserver runs Remote Agents on this machine: the bundled emulators (or
// LocalStack, when AWS_ENDPOINT_URL is set), the resources, the seed fixtures, the
// route table on 127.0.0.1:$RA_PORT (default 8080) and sandboxes as processes.
//
// Environment: RA_PORT, RA_ENV, RA_CONFIG, RA_GUARDRAILS_PATH, RA_DEV_APP_KEY,
// RA_SANDBOX_COMMAND, RA_AGENT_BIN (default dist/agent), and the AWS variables.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/localstack/emulators"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/launch/process"
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
	agent, err := filepath.Abs(envOr("RA_AGENT_BIN", filepath.Join("dist", "agent")))
	if err != nil {
		return err
	}
	work, err := filepath.Abs(envOr("RA_WORK_DIR", filepath.Join(".cache", "dev")))
	if err != nil {
		return err
	}
	srv, err := devserver.Start(ctx, devserver.Options{
		Addr:           "127.0.0.1:" + port,
		Config:         cfg,
		SandboxCommand: process.CommandFromEnv(agent),
		SandboxEnv:     modelEnv(),
		WorkDir:        work,
		SeedDir:        filepath.Join("localstack", "seed"),
		AppKey:         appKey,
		Log:            log,
	})
	if err != nil {
		return err
	}
	fmt.Printf(`
Remote Agents dev server: %s   (health: %s/healthz)
Sandbox logs: %s
Model: %s (RA_LLM_PROVIDER%s)

Create an agent:

  curl -s -X POST %s/api/remote_agents/create \
    -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \
    -d '{"project_name":"demo","persona_slug":"assistant","initial_prompt":"Hello!"}'

Ctrl-C stops the server, its sandboxes and the emulators.
`, srv.URL, srv.URL, filepath.Join(work, "sandboxes"), provider(), modelNote(), srv.URL, appKey)
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Close(shutdown)
}

// defaultProvider is the model sandboxes get when RA_LLM_PROVIDER is unset: a
// sandbox falls back to none by itself, so the dev server says which.
const defaultProvider = "scripted"

// modelEnv passes the model settings, and the key variable they name, on to
// sandboxes (which inherit no RA_ or AWS_ variable otherwise). Without
// RA_LLM_PROVIDER, sandboxes get the scripted provider, and the banner says so.
func modelEnv() []string {
	env := []string{"RA_LLM_PROVIDER=" + provider()}
	for _, k := range []string{"RA_LLM_MODEL", "RA_LLM_BASE_URL", "RA_LLM_API_KEY_ENV", "RA_LLM_SCRIPT", "RA_TOKEN_LIMIT", "RA_LLM_MAX_TOKENS", "RA_LLM_TEMPERATURE",
		"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if k := os.Getenv("RA_LLM_API_KEY_ENV"); k != "" {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// modelNote says where the model setting came from.
func modelNote() string {
	if os.Getenv("RA_LLM_PROVIDER") == "" {
		return " unset: the scripted provider, which answers without a model"
	}
	return ""
}

// provider is the model provider sandboxes run with.
func provider() string { return envOr("RA_LLM_PROVIDER", defaultProvider) }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
