// Command agent is the headless agent that runs inside every sandbox: it runs,
// validates and inspects Agentfile workflows, and in a sandbox (`agent sandbox`)
// it is the remote agent apps talk to. `agent help` lists the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/cli"
	"github.com/remote-agents/remote-agents/sandbox/confine"
	"github.com/remote-agents/remote-agents/sandbox/egresstrust"
	"github.com/remote-agents/remote-agents/sandbox/harden"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/sandbox/remote"
	"github.com/remote-agents/remote-agents/sandbox/tmux"
	"github.com/remote-agents/remote-agents/sandbox/tools"
)

// version is set at build time: -ldflags "-X main.version=…".
var version = "dev"

func main() {
	// Re-run as the confining helper of a job's command (package confine),
	// it restricts itself and becomes that command.
	confine.Main()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = cli.Usage

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version":
		fmt.Fprintln(stdout, "agent", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	// No command the agent ran outlives it.
	defer tools.KillRunning()
	// Nothing the agent runs may read its memory or its initial environment.
	hardenErr := harden.Process()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if args[0] == "sandbox" {
		return sandbox(ctx, hardenErr, stderr)
	}
	// The environment is read here, once, and passed down.
	env, err := agentconfig.LoadEnv(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return 2
	}
	if code, ok := cli.Main(ctx, env, args, stdout, stderr); ok {
		return code
	}
	fmt.Fprintf(stderr, "agent: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// sandbox runs the remote mode, inside the tmux session the platform named when
// tmux is installed. Inside tmux, the agent logs to its pane and to its
// supervisor's log stream, and takes its environment from its supervisor's
// pipe. Every error of a sandbox is logged, hardenErr (its process could not be
// protected) too; what it logs is redacted of the secrets it knows.
func sandbox(ctx context.Context, hardenErr error, stderr io.Writer) int {
	environ, handoffErr := environment()
	lookup := func(name string) (string, bool) {
		if slices.Contains(agentconfig.TmuxVariables, name) {
			return os.LookupEnv(name) // what the supervisor set for the agent inside
		}
		for _, kv := range slices.Backward(environ) {
			if k, v, ok := strings.Cut(kv, "="); ok && k == name {
				return v, true
			}
		}
		return "", false
	}
	env, envErr := agentconfig.LoadEnv(lookup)
	envErr = errors.Join(hardenErr, handoffErr, envErr)
	// The secrets stay in the agent's memory only: commands it runs get an
	// environment of their own (package toolenv), and the variables are
	// removed from its own (its initial environment, which /proc shows, is
	// no one else's to read: harden.Process).
	secrets := env.Secrets(environ)
	for name := range secrets {
		_ = os.Unsetenv(name)
	}
	redactor := redact.New(slices.Collect(maps.Values(secrets))...)
	logOut := redactor.Writer(stderr)
	if env.Tmux.Inside {
		var logs io.Writer
		var stop func()
		ctx, logs, stop = tmux.Inside(ctx, env.Tmux)
		defer stop()
		if logs != nil {
			logOut = redactor.Writer(io.MultiWriter(stderr, logs))
		}
	}
	log := slog.New(slog.NewJSONHandler(logOut, nil))
	if envErr != nil {
		log.Error(envErr.Error())
		return 2
	}
	if tmux.Usable(env.Tmux) {
		if err := env.CheckSandbox(); err != nil {
			log.Error(err.Error())
			return 2
		}
		self, err := os.Executable()
		if err == nil {
			code, err := tmux.Supervise(ctx, env.Tmux.SessionName, env.Workspace, []string{self, "sandbox"}, environ, redactor.Writer(stderr))
			if err != nil {
				log.Error("tmux", slog.String("error", err.Error()))
			}
			return code
		}
	}
	// Behind an egress proxy whose authority no file gave it (a Fargate
	// task): ask the proxy, before anything goes out.
	environ, trustErr := egresstrust.Trust(ctx, environ, filepath.Join(os.TempDir(), "ra-egress"))
	if trustErr != nil {
		log.Warn("the egress proxy's authority: requests its secrets go with will not verify", slog.String("error", trustErr.Error()))
	}
	cfg, err := remote.NewConfig(env, environ, redactor)
	if err != nil {
		log.Error(err.Error())
		return 2
	}
	if err := remote.Run(ctx, cfg, log); err != nil {
		log.Error("sandbox failed", slog.String("error", err.Error()))
		return 1
	}
	return 0
}

// environment is what the agent's environment is: inside tmux, the one its
// supervisor hands over (the tmux server has only the host variables);
// otherwise its own.
func environment() ([]string, error) {
	if path := os.Getenv(agentconfig.EnvTmuxEnvPipe); path != "" {
		environ, err := tmux.ReadEnv(path)
		if err != nil {
			return os.Environ(), err
		}
		return environ, nil
	}
	return os.Environ(), nil
}
