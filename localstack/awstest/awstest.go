// Package awstest gives integration tests a ready local AWS.
//
// A test binary calls Main from its TestMain. When the environment already points
// at AWS endpoints (AWS_ENDPOINT_URL for LocalStack, or the per-service variables,
// as `make test` sets them for the bundled emulators), those are used; otherwise
// the emulators are started for this binary's run and stopped after it.
//
// Under `go test -short` with no AWS endpoints in the environment, the
// emulators are not started and every test that asks for the local AWS
// (Config, Resources) is skipped, so `go test -short ./shared/...` runs the
// logic's tests in seconds; make test never passes -short, and runs them all.
//
// Every test gets its own environment name, so its tables, queues and bucket are
// its own: tests run in parallel and re-run without cleanup.
package awstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/remote-agents/remote-agents/localstack/emulators"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/bootstrap"
	"github.com/remote-agents/remote-agents/shared/resources"
)

// Main runs m against a local AWS and exits with its result.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run runs m against a local AWS and returns its exit code, for a TestMain that
// has more to set up and tear down around it.
func Run(m *testing.M) int {
	flag.Parse()
	if !awsconfig.Overridden() && testing.Short() {
		noAWS = true
		return m.Run()
	}
	if !awsconfig.Overridden() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		emu, err := emulators.Start(ctx, emulators.Options{})
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "awstest:", err)
			return 1
		}
		defer func() { _ = emu.Stop() }()
		for _, kv := range emu.Env() {
			k, v, _ := strings.Cut(kv, "=")
			if err := os.Setenv(k, v); err != nil {
				fmt.Fprintln(os.Stderr, "awstest:", err)
				return 1
			}
		}
	}
	return m.Run()
}

// noAWS: -short, and no AWS endpoints given; the emulators were not started.
var noAWS bool

// Need skips t under -short when no local AWS was started (see the package
// comment); Config and Resources call it.
func Need(t testing.TB) {
	t.Helper()
	if noAWS {
		t.Skip("needs the local AWS, which -short does not start")
	}
}

// Config returns the aws.Config of the local AWS.
func Config(t testing.TB) aws.Config {
	t.Helper()
	Need(t)
	cfg, err := awsconfig.Load(t.Context())
	if err != nil {
		t.Fatalf("awstest: %v", err)
	}
	return cfg
}

// UniqueEnv returns a fresh environment name, e.g. "t3f9a0c12d4".
func UniqueEnv(t testing.TB) string {
	t.Helper()
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("awstest: %v", err)
	}
	return "t" + hex.EncodeToString(b)
}

// Resources bootstraps a fresh environment of every resource and returns it with
// the bootstrap's report (queue URLs among it).
func Resources(t testing.TB) (resources.Set, bootstrap.Report) {
	t.Helper()
	set, err := resources.For(UniqueEnv(t))
	if err != nil {
		t.Fatalf("awstest: %v", err)
	}
	report, err := bootstrap.Run(t.Context(), bootstrap.ClientsFor(Config(t)), set)
	if err != nil {
		t.Fatalf("awstest: bootstrap %s: %v", set.Env, err)
	}
	return set, report
}
