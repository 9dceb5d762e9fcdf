package wiring

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Service runs a long-lived service (a container of its own on AWS: the
// egress proxy, the sandbox proxy) in the environment's Env until SIGTERM
// or an interrupt, and exits 1 if it cannot start or fails; name says
// which in its log.
func Service(name string, run func(context.Context, *Env) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	e, err := FromEnvironment(ctx)
	if err == nil {
		err = run(ctx, e)
	}
	stop()
	if err != nil {
		slog.Error(name, slog.String("error", err.Error()))
		os.Exit(1)
	}
}
