// Command emulators runs the bundled local AWS emulators (DynamoDB Local, goaws,
// gofakes3) on free loopback ports.
//
//	emulators [-bootstrap] [-env dev] [-env-file FILE]            serve until interrupted
//	emulators [-bootstrap] [-env dev] [-env-file FILE] -- CMD…    run CMD against them, then stop
//
// It prints the endpoint variables as shell exports (and writes them to FILE), so
// another shell can use the same emulators. The emulators stop, by pid, when it
// exits; with a command, it exits with the command's status.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/localstack/emulators"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/bootstrap"
	"github.com/remote-agents/remote-agents/shared/resources"
)

func main() {
	boot := flag.Bool("bootstrap", false, "create the environment's resources once the emulators are up")
	env := flag.String("env", envOr("RA_ENV", "dev"), "environment to bootstrap")
	envFile := flag.String("env-file", "", "also write the endpoint exports to this file")
	flag.Parse()
	code, err := run(*boot, *env, *envFile, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "emulators:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func run(boot bool, env, envFile string, command []string) (int, error) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)

	started := time.Now()
	emu, err := emulators.Start(context.Background(), emulators.Options{})
	if err != nil {
		return 1, err
	}
	defer func() {
		if err := emu.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "emulators:", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "emulators: DynamoDB %s, SQS %s, S3 %s ready in %.2fs (pids %v, logs %s)\n",
		emu.DynamoDB, emu.SQS, emu.S3, time.Since(started).Seconds(), emu.Pids(), emu.LogDir)

	vars := emu.Env()
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return 1, err
		}
	}
	if boot {
		if err := bootstrapEnv(env); err != nil {
			return 1, err
		}
	}
	exports := exportLines(vars)
	if envFile != "" {
		if err := os.WriteFile(envFile, []byte(exports), 0o600); err != nil {
			return 1, err
		}
		defer func() { _ = os.Remove(envFile) }()
	}

	if len(command) == 0 {
		fmt.Print(exports)
		fmt.Fprintln(os.Stderr, "emulators: running; Ctrl-C stops them")
		<-signals
		return 0, nil
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return 1, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-signals:
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				return exit.ExitCode(), nil
			}
			return 0, err
		}
	}
}

func bootstrapEnv(env string) error {
	set, err := resources.For(env)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		return err
	}
	report, err := bootstrap.Run(ctx, bootstrap.ClientsFor(cfg), set)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "emulators: environment %s bootstrapped (%d created, %d already there)\n",
		env, len(report.Created), len(report.Existing))
	return nil
}

func exportLines(vars []string) string {
	var b strings.Builder
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s=%q\n", k, v)
	}
	return b.String()
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
