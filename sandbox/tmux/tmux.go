// Package tmux runs the agent inside a named tmux session, so an operator can
// attach to the terminal the agent runs in (`tmux -L <name> attach -t <name>`).
//
// The process the launcher started stays in front as a supervisor: it starts a
// private tmux server (its own socket, named like the session) running the agent,
// forwards SIGTERM and SIGINT to the agent, waits for the session to end and exits
// with the agent's status. The agent watches its supervisor and stops if it dies,
// so a killed sandbox leaves nothing running behind.
package tmux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
)

const (
	pidFile      = ".agent.pid"
	exitFile     = ".agent.exit"
	pollInterval = 300 * time.Millisecond
)

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Usable reports whether the agent should run inside the tmux session t names:
// tmux is installed and not disabled, the name is safe, and this process is not
// already the inner agent.
func Usable(t agentconfig.Tmux) bool {
	if t.SessionName == "" || !validName.MatchString(t.SessionName) || t.Inside || t.Disabled {
		return false
	}
	_, err := exec.LookPath("tmux")
	return err == nil
}

// Supervise starts argv inside tmux session name (socket name too), in workspace,
// and waits for it. It returns the agent's exit status. The agent it starts finds
// agentconfig.EnvInTmux set and its supervisor's pid in
// agentconfig.EnvTmuxSupervisorPID.
func Supervise(ctx context.Context, name, workspace string, argv []string) (int, error) {
	_ = os.Remove(filepath.Join(workspace, exitFile))
	_ = os.Remove(filepath.Join(workspace, pidFile))
	args := append([]string{"-L", name, "-f", "/dev/null", "new-session", "-d", "-s", name, "-x", "200", "-y", "50", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "tmux", args...)
	cmd.Dir = workspace
	cmd.Env = append(os.Environ(), agentconfig.EnvInTmux+"=1", agentconfig.EnvTmuxSupervisorPID+"="+strconv.Itoa(os.Getpid()))
	if out, err := cmd.CombinedOutput(); err != nil {
		return 1, fmt.Errorf("start tmux session %s: %w: %s", name, err, out)
	}
	signalled := false
	for {
		if !hasSession(name) {
			return exitStatus(workspace), nil
		}
		select {
		case <-ctx.Done():
			if !signalled {
				signalled = true
				signalAgent(workspace, syscall.SIGTERM)
			}
		case <-time.After(pollInterval):
		}
	}
}

// Inside prepares the inner agent: it records its pid for the supervisor and
// returns a context that ends when the supervisor (process sup) dies.
func Inside(ctx context.Context, workspace string, sup int) (context.Context, func(code int)) {
	_ = os.WriteFile(filepath.Join(workspace, pidFile), []byte(strconv.Itoa(os.Getpid())), 0o600)
	ctx, cancel := context.WithCancel(ctx)
	if sup > 1 {
		go func() {
			for ctx.Err() == nil {
				if err := syscall.Kill(sup, 0); errors.Is(err, syscall.ESRCH) {
					cancel()
					return
				}
				time.Sleep(pollInterval)
			}
		}()
	}
	return ctx, func(code int) {
		cancel()
		_ = os.WriteFile(filepath.Join(workspace, exitFile), []byte(strconv.Itoa(code)), 0o600)
	}
}

func hasSession(name string) bool {
	return exec.Command("tmux", "-L", name, "has-session", "-t", "="+name).Run() == nil
}

func signalAgent(workspace string, sig syscall.Signal) {
	b, err := os.ReadFile(filepath.Join(workspace, pidFile))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
		_ = syscall.Kill(pid, sig)
	}
}

func exitStatus(workspace string) int {
	b, err := os.ReadFile(filepath.Join(workspace, exitFile))
	if err != nil {
		return 1 // the agent ended without saying how: treat as a failure
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 1
	}
	return code
}
