package process_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/launch/process"
)

type exits struct {
	mu  sync.Mutex
	got []launch.Exit
	ch  chan launch.Exit
}

func (e *exits) record(x launch.Exit) {
	e.mu.Lock()
	e.got = append(e.got, x)
	e.mu.Unlock()
	e.ch <- x
}

func newLauncher(t *testing.T, script string) (*process.Launcher, *exits, string) {
	t.Helper()
	dir := t.TempDir()
	ex := &exits{ch: make(chan launch.Exit, 4)}
	l, err := process.New(process.Options{Command: []string{"/bin/sh", "-c", script}, Dir: dir, LogDir: dir, OnExit: ex.record})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.StopAll(time.Second) })
	return l, ex, dir
}

func TestLaunchPassesIdentityAndIsIdempotent(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "platform-secret")
	t.Setenv("RA_DEV_APP_KEY", "platform-app-key")
	l, ex, dir := newLauncher(t, `echo "$RA_SESSION_ID $RA_GENERATION $RA_GATEWAY_URL $RA_SANDBOX_TOKEN" > identity; pwd > where; echo "$AWS_SECRET_ACCESS_KEY$RA_DEV_APP_KEY" > secrets; exit 3`)
	spec := launch.Spec{SessionID: "s1", Generation: 2, GatewayURL: "http://127.0.0.1:1", SandboxToken: "rsb_t"}
	ref, err := l.Launch(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	again, err := l.Launch(t.Context(), spec)
	if err != nil || again != ref {
		t.Errorf("second launch: %q, %v; want %q", again, err, ref)
	}
	x := <-ex.ch
	if x.SessionID != "s1" || x.Generation != 2 || x.ExitCode != 3 || x.Ref != ref {
		t.Errorf("exit %+v", x)
	}
	work := filepath.Join(dir, "s1-2")
	id, err := os.ReadFile(filepath.Join(work, "identity"))
	if err != nil || strings.TrimSpace(string(id)) != "s1 2 http://127.0.0.1:1 rsb_t" {
		t.Errorf("identity %q, %v", id, err)
	}
	if secrets, _ := os.ReadFile(filepath.Join(work, "secrets")); strings.TrimSpace(string(secrets)) != "" {
		t.Errorf("sandbox inherited the platform's secrets: %q", secrets)
	}
	if where, _ := os.ReadFile(filepath.Join(work, "where")); strings.TrimSpace(string(where)) != work {
		t.Errorf("ran in %q, want %q", where, work)
	}
	time.Sleep(100 * time.Millisecond)
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if len(ex.got) != 1 {
		t.Errorf("%d exits for one idempotent launch", len(ex.got))
	}
}

func TestStopEscalatesToKill(t *testing.T) {
	t.Parallel()
	// The sandbox ignores SIGTERM: Stop must kill it after the grace period.
	l, ex, _ := newLauncher(t, `trap '' TERM; while :; do sleep 0.1; done`)
	ref, err := l.Launch(t.Context(), launch.Spec{SessionID: "s2", Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	if err := l.Stop(t.Context(), ref, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 500*time.Millisecond {
		t.Errorf("stopped after %s, before the grace period", took)
	}
	if x := <-ex.ch; x.ExitCode != -1 || !strings.Contains(x.Detail, "killed") {
		t.Errorf("exit %+v, want killed", x)
	}
	if len(l.Running()) != 0 {
		t.Errorf("still running: %v", l.Running())
	}
	if err := l.Stop(t.Context(), ref, time.Second); err != nil {
		t.Errorf("stopping a stopped sandbox: %v", err)
	}
}

func TestStopGraceful(t *testing.T) {
	t.Parallel()
	l, ex, _ := newLauncher(t, `trap 'exit 0' TERM; while :; do sleep 0.1; done`)
	ref, err := l.Launch(t.Context(), launch.Spec{SessionID: "s3", Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := l.Stop(t.Context(), ref, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if x := <-ex.ch; x.ExitCode != 0 {
		t.Errorf("exit %+v, want a clean exit on SIGTERM", x)
	}
}
