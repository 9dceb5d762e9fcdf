// Command sandboxproxy is the sandbox proxy service (package
// sandboxproxyservice): a container of its own on AWS, run by the stack's
// Fargate service behind an internet-facing load balancer, the way in to
// sandboxes' envd (E2B_SANDBOX_URL).
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/sandboxproxyservice"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	e, err := wiring.FromEnvironment(ctx)
	if err == nil {
		err = sandboxproxyservice.Run(ctx, e)
	}
	if err != nil {
		slog.Error("sandbox proxy", slog.String("error", err.Error()))
		os.Exit(1)
	}
}
