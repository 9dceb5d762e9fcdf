// Command egressproxy is the egress proxy service (package
// egressservice): a container of its own on AWS, run by the stack's
// Fargate service behind an internal load balancer.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/egressservice"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	e, err := wiring.FromEnvironment(ctx)
	if err == nil {
		err = egressservice.Run(ctx, e)
	}
	if err != nil {
		slog.Error("egress proxy", slog.String("error", err.Error()))
		os.Exit(1)
	}
}
