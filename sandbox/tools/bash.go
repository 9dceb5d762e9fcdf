package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/confine"
	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/toolenv"
)

// Limits of bash.
const (
	defaultBashTimeout = 120 * time.Second
	maxBashTimeout     = 600 * time.Second
	maxOutputBytes     = 64 * 1024
)

func bashTool(p *policy.Policy, o Options) Tool {
	return Tool{
		Name:        "bash",
		Description: "Run a shell command in the workspace. Returns the exit code, stdout and stderr (each capped at 64 KiB).",
		Schema: `{"type":"object","additionalProperties":false,"required":["command"],"properties":{
			"command":{"type":"string","minLength":1,"maxLength":16384},
			"timeout_seconds":{"type":"integer","minimum":1,"maximum":600,"description":"default 120"}}}`,
		Run: func(ctx context.Context, raw json.RawMessage) (string, error) {
			a, err := decode[struct {
				Command string
				Timeout int `json:"timeout_seconds"`
			}](raw)
			if err != nil {
				return "", err
			}
			if err := p.CheckCommand(a.Command); err != nil {
				return "", err
			}
			timeout := defaultBashTimeout
			if a.Timeout > 0 {
				timeout = min(time.Duration(a.Timeout)*time.Second, maxBashTimeout)
			}
			var env []string
			if o.Env != nil {
				env = o.Env()
			}
			return runShell(ctx, shellRun{dir: p.Workspace(), command: a.Command, timeout: timeout, env: env, user: o.User, noNetwork: o.NoNetwork, confine: o.Confine})
		},
	}
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	buf     bytes.Buffer
	max     int
	dropped int
}

func (c *capped) Write(b []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room >= len(b) {
		return c.buf.Write(b)
	}
	if room > 0 {
		c.buf.Write(b[:room])
	}
	c.dropped += len(b) - max(room, 0)
	return len(b), nil
}

func (c *capped) String() string {
	if c.dropped > 0 {
		return c.buf.String() + fmt.Sprintf("\n… (%d more bytes cut)", c.dropped)
	}
	return c.buf.String()
}

// shellRun is one command: where, what, for how long, with which
// environment (nil: the agent's) and as whom (nil: the agent's user).
type shellRun struct {
	dir, command string
	timeout      time.Duration
	env          []string
	user         *toolenv.User
	// noNetwork runs the command in a network namespace of its own.
	noNetwork bool
	// confine, if set, confines it to these directories.
	confine *confine.Rules
}

func runShell(ctx context.Context, r shellRun) (string, error) {
	shell := "bash"
	if _, err := exec.LookPath(shell); err != nil {
		shell = "sh"
	}
	timeout := r.timeout
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell, "-c", r.command)
	if r.confine != nil {
		c, err := confine.Command(ctx, *r.confine, shell, "-c", r.command)
		if err != nil {
			return "", fmt.Errorf("command could not run confined: %w", err)
		}
		cmd = c
	}
	cmd.Dir = r.dir
	if r.env != nil {
		cmd.Env = r.env
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: r.user.Credential()}
	if r.noNetwork {
		if err := isolateNetwork(cmd.SysProcAttr); err != nil {
			return "", fmt.Errorf("command could not run without network: %w", err)
		}
	}
	// On timeout, kill the whole process group, not just the shell.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	stdout, stderr := &capped{max: maxOutputBytes}, &capped{max: maxOutputBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Start()
	if err == nil {
		forget := track(cmd.Process.Pid)
		err = cmd.Wait()
		forget()
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "", fmt.Errorf("command timed out after %s\nstdout:\n%s\nstderr:\n%s", timeout, stdout, stderr)
	}
	return commandResult("command", err, stdout, stderr)
}

// commandResult is what a command (what: "command" for bash's, "git") that
// ended with err (nil, an *exec.ExitError, or a failure to run it) tells the
// model: its exit code, stdout and stderr, as an error when the code is not 0.
func commandResult(what string, err error, stdout, stderr *capped) (string, error) {
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		return "", fmt.Errorf("%s could not run: %w", what, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "exit code: %d\n", code)
	fmt.Fprintf(&b, "stdout:\n%s\n", stdout)
	fmt.Fprintf(&b, "stderr:\n%s", stderr)
	if code != 0 {
		return "", errors.New(b.String())
	}
	return b.String(), nil
}
