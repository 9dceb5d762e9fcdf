// Command agent is the headless agent that runs inside every sandbox: it runs,
// validates and inspects Agentfile workflows, and in a sandbox (`agent sandbox`)
// it is the remote agent apps talk to. `agent help` lists the commands.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/cli"
	"github.com/remote-agents/remote-agents/sandbox/remote"
	"github.com/remote-agents/remote-agents/sandbox/tmux"
)

// version is set at build time: -ldflags "-X main.version=…".
var version = "dev"

func main() {
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
	// The environment is read here, once, and passed down.
	env, err := agentconfig.LoadEnv(os.LookupEnv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if args[0] == "sandbox" {
		return sandbox(ctx, env, err, stderr)
	}
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
// tmux is installed. envErr is the environment's, logged like every error of a
// sandbox. Inside tmux, the agent logs to its pane and to its supervisor's log
// stream.
func sandbox(ctx context.Context, env agentconfig.Env, envErr error, stderr io.Writer) int {
	logOut := stderr
	if env.Tmux.Inside {
		var logs io.Writer
		var stop func()
		ctx, logs, stop = tmux.Inside(ctx, env.Tmux)
		defer stop()
		if logs != nil {
			logOut = io.MultiWriter(stderr, logs)
		}
	}
	log := slog.New(slog.NewJSONHandler(logOut, nil))
	if envErr != nil {
		log.Error(envErr.Error())
		return 2
	}
	cfg, err := remote.NewConfig(env)
	if err != nil {
		log.Error(err.Error())
		return 2
	}
	if tmux.Usable(env.Tmux) {
		self, err := os.Executable()
		if err == nil {
			code, err := tmux.Supervise(ctx, env.Tmux.SessionName, cfg.Workspace, []string{self, "sandbox"}, stderr)
			if err != nil {
				log.Error("tmux", slog.String("error", err.Error()))
			}
			return code
		}
	}
	if err := remote.Run(ctx, cfg, log); err != nil {
		log.Error("sandbox failed", slog.String("error", err.Error()))
		return 1
	}
	return 0
}
