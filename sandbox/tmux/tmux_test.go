package tmux_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/tmux"
)

// innerArg makes the test binary play the agent inside the tmux session.
const (
	innerArg  = "tmux-test-agent"
	readerArg = "tmux-test-env-reader"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == innerArg {
		os.Exit(forger(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == readerArg {
		os.Exit(envReader(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// envReader is an agent that reads the environment its supervisor hands over
// and writes it, with its own, to the file args[0], then says "up" on the fifo
// args[1] and waits for SIGTERM.
func envReader(args []string) int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	handed, err := tmux.ReadEnv(os.Getenv(agentconfig.EnvTmuxEnvPipe))
	if err != nil {
		return 3
	}
	raw, _ := json.Marshal(map[string][]string{"handed": handed, "own": os.Environ()})
	if os.WriteFile(args[0], raw, 0o600) != nil || os.WriteFile(args[1], []byte("up\n"), 0o600) != nil {
		return 3
	}
	<-term
	return 0
}

// forger is an agent that writes, as a command run by the model could, the
// files an old supervisor trusted: the pid of another process in .agent.pid and
// a clean exit in .agent.exit. It says "up" on the fifo args[2], then exits 7 on
// SIGTERM.
func forger(args []string) int {
	victim, workspace, ready := args[0], args[1], args[2]
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if os.WriteFile(filepath.Join(workspace, ".agent.pid"), []byte(victim), 0o600) != nil ||
		os.WriteFile(filepath.Join(workspace, ".agent.exit"), []byte("0"), 0o600) != nil ||
		os.WriteFile(ready, []byte("up\n"), 0o600) != nil {
		return 3
	}
	<-term
	return 7
}

var sessions atomic.Int32

// session returns a tmux session name of its own, and kills its server at the
// end of the test.
func session(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed: .ci/run installs it")
	}
	name := fmt.Sprintf("ra-test-%d-%d", os.Getpid(), sessions.Add(1))
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", name, "kill-server").Run() })
	return name
}

// The supervisor signals the process tmux runs in the pane and reports the
// status tmux saw it exit with, whatever the agent wrote in its workspace.
func TestSupervisorTrustsTmuxNotTheWorkspace(t *testing.T) {
	t.Parallel()
	name := session(t)
	workspace := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	victim := exec.Command("sleep", "600")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	victimDone := make(chan struct{})
	go func() { _ = victim.Wait(); close(victimDone) }()
	t.Cleanup(func() { _ = victim.Process.Kill(); <-victimDone })
	ready := filepath.Join(t.TempDir(), "ready")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		code int
		err  error
	}
	supervised := make(chan result, 1)
	go func() {
		code, err := tmux.Supervise(ctx, name, workspace, []string{self, innerArg, strconv.Itoa(victim.Process.Pid), workspace, ready}, os.Environ(), io.Discard)
		supervised <- result{code, err}
	}()
	up := make(chan string, 1)
	go func() { b, _ := os.ReadFile(ready); up <- string(b) }()
	select {
	case got := <-up:
		if got != "up\n" {
			t.Fatalf("the agent said %q", got)
		}
	case r := <-supervised:
		t.Fatalf("the agent ended before it was up: %d, %v", r.code, r.err)
	}

	cancel() // what SIGTERM to the supervisor does
	select {
	case <-victimDone:
		t.Fatal("the supervisor signalled the pid the agent wrote in its workspace")
	case r := <-supervised:
		// tmux (3.3) can miss its child's exit; the supervisor's SIGCHLD
		// makes it reap the child, so the status is the agent's own, never
		// the 0 it wrote in .agent.exit.
		if r.err != nil || r.code != 7 {
			t.Errorf("supervise: status %d, %v; want the agent's own 7, not what it wrote in .agent.exit", r.code, r.err)
		}
	}
	select {
	case <-victimDone:
		t.Error("the supervisor signalled the pid the agent wrote in its workspace")
	default:
	}
}

// The launcher's environment reaches the agent through the supervisor's pipe,
// never through tmux: the tmux server, which any process of the user can ask
// for its environment, holds the host variables only.
// (Not parallel: it sets the process's environment.)
func TestTheEnvironmentGoesAroundTmux(t *testing.T) {
	name := session(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out, ready := filepath.Join(dir, "env.json"), filepath.Join(dir, "ready")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	// The supervisor's own environment, as the launcher gave it.
	const secret = "RA_BOOTSTRAP_CODE=rbc_handed_over_only"
	t.Setenv("RA_BOOTSTRAP_CODE", "rbc_handed_over_only")
	environ := os.Environ()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	supervised := make(chan int, 1)
	go func() {
		code, _ := tmux.Supervise(ctx, name, dir, []string{self, readerArg, out, ready}, environ, io.Discard)
		supervised <- code
	}()
	up := make(chan struct{})
	go func() { _, _ = os.ReadFile(ready); close(up) }()
	select {
	case <-up:
	case code := <-supervised:
		t.Fatalf("the agent ended before it was up: %d", code)
	}
	var got map[string][]string
	raw, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(raw, &got) != nil {
		t.Fatalf("the agent's report %q: %v", raw, err)
	}
	if !slices.Equal(got["handed"], environ) {
		t.Errorf("the agent was handed %d variables, want the supervisor's %d", len(got["handed"]), len(environ))
	}
	if slices.Contains(got["own"], secret) {
		t.Error("the agent's own environment, which tmux gave it, holds the launcher's secret")
	}
	server, err := exec.Command("tmux", "-L", name, "show-environment", "-g").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(server), "rbc_handed_over_only") {
		t.Errorf("the tmux server's environment holds the secret:\n%s", server)
	}
	cancel()
	<-supervised
}

// A session whose supervisor is gone (killed outright) does not outlive its
// agent for ever: once the pane has been dead for the orphan grace, the tmux
// server ends itself.
func TestOrphanedSessionEndsItself(t *testing.T) {
	defer tmux.SetOrphanGrace(time.Second)()
	name := session(t)
	if _, err := tmux.Start(name, t.TempDir(), []string{"true"}, os.Environ()); err != nil {
		t.Fatal(err)
	}
	// The server's end is the event; the bound only fails a server that stays.
	deadline := time.Now().Add(30 * time.Second)
	for exec.Command("tmux", "-L", name, "has-session").Run() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the tmux server of a dead pane nobody reads is still there after 30 s")
		}
		runtime.Gosched()
	}
}

// TestALeftoverSessionOfTheSameNameGivesWay: an agent resumed at once on
// the machine its paused sandbox ran on finds that sandbox's session, not
// yet ended: the new one starts once it has gone, never ending it itself
// (its supervisor would end the new one).
func TestALeftoverSessionOfTheSameNameGivesWay(t *testing.T) {
	defer tmux.SetOrphanGrace(time.Second)()
	name := session(t)
	first, err := tmux.Start(name, t.TempDir(), []string{"true"}, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	second, err := tmux.Start(name, t.TempDir(), []string{"sleep", "301"}, os.Environ())
	if err != nil {
		t.Fatalf("a second session of the same name: %v", err)
	}
	if second == first {
		t.Fatalf("the second start answered the first's pane %d", first)
	}
	if out, err := exec.Command("tmux", "-L", name, "list-panes", "-a", "-F", "#{pane_pid}").Output(); err != nil || strings.TrimSpace(string(out)) != strconv.Itoa(second) {
		t.Errorf("panes after the second start: %q %v, want only %d", out, err, second)
	}
}

// TestOneSupervisorOfANameAtATime: the lock of a session name is held by
// one supervisor at a time; the next takes it once it is released.
func TestOneSupervisorOfANameAtATime(t *testing.T) {
	name := session(t)
	release, held := tmux.HoldName(name, 0)
	if !held {
		t.Fatal("a free name's lock was not taken")
	}
	if again, held := tmux.HoldName(name, 0); held {
		again()
		t.Fatal("a held name's lock was taken twice")
	}
	release()
	next, held := tmux.HoldName(name, 0)
	if !held {
		t.Fatal("a released lock was not taken")
	}
	next()
}
