package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/localstack/awstest"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// The LocalStack init hook, run as LocalStack would run it but against the local
// AWS of the tests, creates everything once and nothing the second time.
func TestInitHookRunsTheBootstrapIdempotently(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	env := awstest.UniqueEnv(t)
	hook := filepath.Join("..", "..", "init", "ready.d", "10-bootstrap.sh")
	runHook := func() string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "bash", hook)
		cmd.Env = append(os.Environ(), "RA_BOOTSTRAP_BIN="+bin, "RA_ENV="+env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("hook: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := runHook(); !strings.Contains(out, "environment "+env+": 15 created, 0 already there") {
		t.Errorf("first run:\n%s", out)
	}
	if out := runHook(); !strings.Contains(out, "environment "+env+": 0 created, 15 already there") {
		t.Errorf("second run:\n%s", out)
	}
}

// The compose file mounts the hook and the binary where the hook looks for them.
func TestComposeMountsWhatTheHookUses(t *testing.T) {
	t.Parallel()
	compose, err := os.ReadFile(filepath.Join("..", "..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	hook, err := os.ReadFile(filepath.Join("..", "..", "init", "ready.d", "10-bootstrap.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"./init/ready.d:/etc/localstack/init/ready.d",
		"../dist/localstack/bootstrap:/opt/remote-agents/bootstrap",
		"127.0.0.1:4566:4566",
	} {
		if !strings.Contains(string(compose), want) {
			t.Errorf("docker-compose.yml lacks %q", want)
		}
	}
	if !strings.Contains(string(hook), "/opt/remote-agents/bootstrap") {
		t.Error("hook does not run the mounted bootstrap")
	}
}
