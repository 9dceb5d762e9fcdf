// Package process launches sandboxes as local child processes: the local stand-in
// for Fargate tasks. Each sandbox runs in its own working directory and process
// group, with its identity in the environment and its env file in a private
// folder beside the working directory; Stop sends SIGTERM, then SIGKILL
// after the grace period.
package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/modelgateway"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

var _ launch.Launcher = (*Launcher)(nil)

// Options configure a Launcher.
type Options struct {
	// Command runs the sandbox: argv, e.g. {"dist/agent", "sandbox"}.
	Command []string
	// Dir holds one working directory per sandbox.
	Dir string
	// Env is added to every sandbox's environment (after the parent's).
	Env []string
	// OnExit, if set, is called when a sandbox process ends by itself or is stopped.
	OnExit func(launch.Exit)
	// LogDir, if set, receives each sandbox's output as <session>-<generation>.log.
	LogDir string
}

// Launcher runs sandboxes as child processes.
type Launcher struct {
	o     Options
	mu    sync.Mutex
	procs map[string]*proc // by ref
	keys  map[string]string
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// New returns a process launcher.
func New(o Options) (*Launcher, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("process launcher: no sandbox command")
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("process launcher: %w", err)
	}
	return &Launcher{o: o, procs: map[string]*proc{}, keys: map[string]string{}}, nil
}

// CommandFromEnv returns the sandbox command: RA_SANDBOX_COMMAND run by the shell
// if set, else the agent binary in sandbox mode.
func CommandFromEnv(agentPath string) []string {
	if c := strings.TrimSpace(os.Getenv("RA_SANDBOX_COMMAND")); c != "" {
		return []string{"/bin/sh", "-c", c}
	}
	return []string{agentPath, "sandbox"}
}

// Launch starts a sandbox process, once per session and generation.
func (l *Launcher) Launch(_ context.Context, spec launch.Spec) (string, error) {
	key := spec.SessionID + "-" + strconv.Itoa(spec.Generation)
	l.mu.Lock()
	defer l.mu.Unlock()
	if ref, ok := l.keys[key]; ok {
		return ref, nil
	}
	dir := filepath.Join(l.o.Dir, key)
	// Sandboxes share this machine's /tmp: each keeps its env file in a private
	// folder beside its workspace instead.
	private := dir + ".tmp"
	for _, d := range []string{dir, private} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", fmt.Errorf("launch %s: %w", key, err)
		}
	}
	cmd := exec.Command(l.o.Command[0], l.o.Command[1:]...)
	cmd.Dir = dir
	cmd.Env = append(sandboxEnv(os.Environ()), l.o.Env...)
	for k, v := range spec.Env() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "RA_WORKSPACE="+dir, sandboxwire.EnvFileVar+"="+filepath.Join(private, filepath.Base(sandboxwire.DefaultEnvFile)))
	var logFile *os.File
	if l.o.LogDir != "" {
		f, err := os.Create(filepath.Join(l.o.LogDir, key+".log"))
		if err != nil {
			return "", fmt.Errorf("launch %s: %w", key, err)
		}
		logFile = f
		cmd.Stdout, cmd.Stderr = f, f
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			_ = logFile.Close()
		}
		return "", fmt.Errorf("launch %s: %w", key, err)
	}
	ref := "pid:" + strconv.Itoa(cmd.Process.Pid)
	p := &proc{cmd: cmd, done: make(chan struct{})}
	l.procs[ref] = p
	l.keys[key] = ref
	go func() {
		err := cmd.Wait()
		if logFile != nil {
			_ = logFile.Close()
		}
		// Forget the process before Stop's wait returns: a stopped sandbox is no
		// longer Running.
		l.mu.Lock()
		delete(l.procs, ref)
		l.mu.Unlock()
		close(p.done)
		if l.o.OnExit != nil {
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			}
			l.o.OnExit(launch.Exit{SessionID: spec.SessionID, Generation: spec.Generation, Ref: ref, ExitCode: code, Detail: fmt.Sprint(err)})
		}
	}()
	return ref, nil
}

// sandboxEnv is the parent's environment without what a sandbox must not hold:
// AWS credentials and endpoints (a sandbox reaches platform state only through the
// gateway), the platform's own RA_ settings, and the model providers' keys
// (its model calls go through the platform's model gateway, which holds them).
func sandboxEnv(env []string) []string {
	out := make([]string, 0, len(env))
	keys := modelgateway.KeyVariables()
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "RA_") || slices.Contains(keys, name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Stop terminates a sandbox process group: SIGTERM, then SIGKILL after grace.
func (l *Launcher) Stop(ctx context.Context, ref string, grace time.Duration) error {
	l.mu.Lock()
	p, ok := l.procs[ref]
	l.mu.Unlock()
	if !ok {
		return nil // already stopped, or not ours
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	case <-ctx.Done():
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("sandbox %s did not exit", ref)
	}
}

// StopAll stops every sandbox this launcher started (the dev server's exit).
func (l *Launcher) StopAll(grace time.Duration) {
	l.mu.Lock()
	refs := make([]string, 0, len(l.procs))
	for ref := range l.procs {
		refs = append(refs, ref)
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, ref := range refs {
		wg.Go(func() { _ = l.Stop(context.Background(), ref, grace) })
	}
	wg.Wait()
}

// Running returns the refs of the sandboxes still running.
func (l *Launcher) Running() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	refs := make([]string, 0, len(l.procs))
	for ref := range l.procs {
		refs = append(refs, ref)
	}
	return refs
}
