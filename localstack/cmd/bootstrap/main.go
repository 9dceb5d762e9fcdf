// Command bootstrap creates the AWS resources of one environment, idempotently,
// wherever the standard AWS variables point: LocalStack (its init hook runs this),
// the bundled emulators, or an account of your own.
//
//	bootstrap [-env dev]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/bootstrap"
	"github.com/remote-agents/remote-agents/shared/resources"
)

func main() {
	env := flag.String("env", envOr("RA_ENV", "dev"), "environment name; prefixes every resource (ra-<env>-…)")
	flag.Parse()
	if err := run(*env); err != nil {
		fmt.Fprintln(os.Stderr, "bootstrap:", err)
		os.Exit(1)
	}
}

func run(env string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	set, err := resources.For(env)
	if err != nil {
		return err
	}
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		return err
	}
	report, err := bootstrap.Run(ctx, bootstrap.ClientsFor(cfg), set)
	if err != nil {
		return err
	}
	for _, what := range report.Created {
		fmt.Println("created", what)
	}
	for _, what := range report.Existing {
		fmt.Println("exists ", what)
	}
	fmt.Printf("environment %s: %d created, %d already there\n", env, len(report.Created), len(report.Existing))
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
