// Package tmux runs the agent inside a named tmux session, so an operator can
// attach to the terminal the agent runs in (`tmux -L <name> attach -t <name>`).
//
// The process the launcher started stays in front as a supervisor: it starts a
// private tmux server (its own socket, named like the session) running the agent,
// forwards SIGTERM and SIGINT to the agent, waits for the session to end and exits
// with the agent's status. The agent watches its supervisor and stops if it dies,
// so a killed sandbox leaves nothing running behind.
//
// What the supervisor knows of the agent it learns from tmux, never from a file
// the agent (or a command it runs) can write: the pid it signals is the pane's
// process, which tmux reports when it creates the pane, and the exit status is
// the one tmux keeps for the dead pane. The agent's logs reach the supervisor's
// log stream (the container's, which CloudWatch reads) through a pipe: the pane
// alone is a terminal nobody reads.
//
// The environment the launcher gave the supervisor (the bootstrap code, the
// model settings, any key) reaches the agent through another pipe, never
// through tmux: the tmux server keeps the environment it is started with, and
// any process of the same user can read it (/proc/<pid>/environ, `tmux
// show-environment`). The server gets the host variables only.
package tmux

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

const (
	pollInterval = 300 * time.Millisecond
	// maxUnreaped bounds the polls wait makes for the status of a dead pane.
	maxUnreaped = 30
	// drainTimeout bounds the wait for the agent's last log lines once its pane
	// is dead (a process it started may hold the pipe open).
	drainTimeout = 5 * time.Second
	// maxLogChunk is the most of one log line copied in one write.
	maxLogChunk = 64 << 10
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
// agentconfig.EnvInTmux set, its supervisor's pid in
// agentconfig.EnvTmuxSupervisorPID, in agentconfig.EnvTmuxLogPipe the pipe
// whose lines Supervise copies to logs, and in agentconfig.EnvTmuxEnvPipe the
// pipe it reads environ from (ReadEnv): the environment it is to run with,
// which tmux never sees.
func Supervise(ctx context.Context, name, workspace string, argv, environ []string, logs io.Writer) (int, error) {
	// One supervisor of a session name at a time on a machine: the agent's
	// next sandbox (a resume right after a pause) starts once the last one's
	// supervisor, which ends its session, is gone.
	release, _ := holdName(name, orphanGrace+5*time.Second)
	defer release()
	pipe, err := newLogPipe()
	if err != nil {
		return 1, err
	}
	defer pipe.close()
	go pipe.copyTo(logs)
	handoff, err := newEnvPipe(pipe.dir, environ)
	if err != nil {
		return 1, err
	}
	defer handoff.close()

	env := append(sandboxwire.HostEnv(os.Environ()), agentconfig.EnvInTmux+"=1", agentconfig.EnvTmuxSupervisorPID+"="+strconv.Itoa(os.Getpid()),
		agentconfig.EnvTmuxLogPipe+"="+pipe.path, agentconfig.EnvTmuxEnvPipe+"="+handoff.path)
	pid, err := start(name, workspace, argv, env)
	if err != nil {
		return 1, err
	}
	code := wait(ctx, name, pid)
	pipe.drain()
	return code, nil
}

// orphanGrace is how long a dead pane outlives its agent when no supervisor
// ends its session (one killed outright): then the tmux server ends itself.
var orphanGrace = 10 * time.Second

// start starts argv in a new tmux session name, in workspace, with env, and
// returns the pid of the pane's process: the agent itself.
func start(name, workspace string, argv, env []string) (int, error) {
	if !validName.MatchString(name) {
		return 0, fmt.Errorf("tmux session name %q: want letters, digits, '_' or '-'", name)
	}
	bin, err := exec.LookPath("tmux")
	if err != nil {
		return 0, err
	}
	// The pane stays when the agent exits, so that its exit status can be read
	// (the option is set before the pane exists); should nobody read it, the
	// server ends itself orphanGrace after the pane died. The reaper polls the
	// pane rather than waiting for tmux's pane-died hook: a tmux 3.3 server
	// can miss its first child's exit (the pane is dead, its process an
	// unreaped zombie) and then never runs the hook. "##" is run-shell's
	// escape for a literal '#'.
	reap := fmt.Sprintf(`while [ "$(%[1]s -L %[2]s list-panes -a -F '##{pane_dead}')" = 0 ]; do sleep 1; done; sleep %[3]d; %[1]s -L %[2]s kill-server`,
		bin, name, int(orphanGrace.Seconds()))
	args := []string{"-L", name, "-f", "/dev/null", "set-option", "-g", "remain-on-exit", "on", ";",
		"new-session", "-d", "-s", name, "-x", "200", "-y", "50", "-P", "-F", "#{pane_pid}", "--"}
	args = append(append(args, argv...), ";", "run-shell", "-b", reap)
	// Not tied to the supervisor's context: a stop that arrives while the
	// session starts must not kill the tmux client half way (leaving a pane
	// nobody waits for); wait signals the agent once it runs.
	// A tmux that does not answer within startTimeout fails the start.
	startCtx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	newSession := func() ([]byte, string, error) {
		cmd := exec.CommandContext(startCtx, bin, args...)
		cmd.Dir = workspace
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return out, stderr.String(), err
	}
	out, stderr, err := newSession()
	for try := 1; err != nil && try < 4 && (strings.Contains(stderr, "duplicate session") || strings.Contains(stderr, "server exited unexpectedly")); try++ {
		// The session of this agent's last sandbox on this machine (a
		// paused one, resumed at once), or its server ending: that
		// sandbox's supervisor ends it once its agent is gone. It is waited
		// for, not ended here: that supervisor would end this one's.
		waitGone(bin, name, orphanGrace+5*time.Second)
		out, stderr, err = newSession()
	}
	if err != nil {
		return 0, fmt.Errorf("start tmux session %s: %w: %s", name, err, stderr)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 1 {
		_, _ = run(bin, "-L", name, "kill-session", "-t", "="+name)
		return 0, fmt.Errorf("start tmux session %s: no pane pid in %q", name, out)
	}
	return pid, nil
}

// holdName takes the machine's lock of session name (a file lock, which the
// kernel releases when its holder dies), waiting at most bound for the
// holder before it, and returns its release. A lock it cannot take within
// bound, or at all, is gone without (held false): waitGone still keeps two
// sessions of one name apart.
func holdName(name string, bound time.Duration) (release func(), held bool) {
	if !validName.MatchString(name) {
		return func() {}, false // start refuses it
	}
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "ra-tmux-"+name+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return func() {}, false
	}
	end := time.Now().Add(bound)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, true
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || !time.Now().Before(end) {
			_ = f.Close()
			return func() {}, false
		}
		time.Sleep(pollInterval / 10)
	}
}

// waitGone waits until the tmux server of socket name has gone, and ends
// it after bound: one whose supervisor was killed outright (the supervisor
// that ends a session polls every pollInterval, and a server nobody
// supervises ends itself orphanGrace after its pane died).
func waitGone(bin, name string, bound time.Duration) {
	end := time.Now().Add(bound)
	for time.Now().Before(end) {
		if _, err := run(bin, "-L", name, "has-session"); err != nil {
			return
		}
		time.Sleep(pollInterval / 10)
	}
	_, _ = run(bin, "-L", name, "kill-server")
}

// wait polls the session until its pane is dead (or the session is gone) and
// returns the pane's exit status; when ctx ends it sends SIGTERM to the pane's
// process, once.
func wait(ctx context.Context, name string, pid int) int {
	done := ctx.Done()
	unreaped := 0
	for {
		dead, code, ok := pane(name, pid)
		if !ok {
			// The session was killed, or replaced by the next sandbox's of
			// the same agent (a resume on this machine): the agent did not
			// say how it ended, and the session is not ours to end.
			return 1
		}
		// tmux marks a pane dead when its terminal closes, and records how its
		// process ended once it has reaped it: until then, keep waiting (a
		// bounded while, in case a tmux never says). A tmux 3.3 server can
		// miss its first child's exit, leaving it a zombie nobody reaps: a
		// SIGCHLD of our own makes it look again.
		if dead && code < 0 && unreaped < maxUnreaped {
			unreaped++
			dead = false
			nudge(name)
		}
		if dead {
			_, _ = run("tmux", "-L", name, "kill-session", "-t", "="+name)
			if code < 0 {
				return 1 // tmux never said
			}
			return code
		}
		select {
		case <-done:
			done = nil // signal once, then poll as before
			_ = syscall.Kill(pid, syscall.SIGTERM)
		case <-time.After(unreapedPoll(unreaped)):
		}
	}
}

// unreapedPoll is how long wait waits before asking tmux again: briefly while
// a dead pane's status is due, else pollInterval.
func unreapedPoll(unreaped int) time.Duration {
	if unreaped > 0 {
		return pollInterval / 30
	}
	return pollInterval
}

// nudge sends the session's tmux server a SIGCHLD, so that it reaps a child
// whose exit it missed.
func nudge(name string) {
	out, err := run("tmux", "-L", name, "display-message", "-p", "#{pid}")
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && pid > 1 {
		_ = syscall.Kill(pid, syscall.SIGCHLD)
	}
}

// pane reports whether the session's pane, that of process pid, is dead
// and, if so, its exit status: 1 when it died of a signal, -1 while tmux has
// not yet reaped its process. ok is false when the session is gone, or its
// pane is another process's.
func pane(name string, pid int) (dead bool, code int, ok bool) {
	// The agent's window (0), whichever window is current: the session may
	// hold others (the configuration's services, package provision).
	out, err := run("tmux", "-L", name, "list-panes", "-t", "="+name+":0", "-F", "#{pane_pid}:#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}")
	if err != nil {
		return false, 0, false
	}
	fields := strings.Split(strings.TrimSpace(string(out)), ":")
	if len(fields) != 4 || fields[0] != strconv.Itoa(pid) {
		return false, 0, false
	}
	if fields[1] != "1" {
		return false, 0, true
	}
	if c, err := strconv.Atoi(fields[2]); err == nil {
		return true, c, true
	}
	if fields[3] != "" {
		return true, 1, true
	}
	return true, -1, true
}

// logPipe is the named pipe the agent writes its logs to, in a directory of
// its own. The supervisor holds a write end itself, so that reading waits for
// lines instead of ending before the agent opened the pipe; once the agent is
// gone, closing it lets reading end after the last line.
type logPipe struct {
	dir, path string
	r, keep   *os.File
	done      chan struct{}
}

func newLogPipe() (*logPipe, error) {
	dir, err := os.MkdirTemp("", "ra-tmux-")
	if err != nil {
		return nil, fmt.Errorf("log pipe: %w", err)
	}
	p := &logPipe{dir: dir, path: filepath.Join(dir, "log"), done: make(chan struct{})}
	if err := syscall.Mkfifo(p.path, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("log pipe: %w", err)
	}
	// Opening the read end does not wait for a writer (O_NONBLOCK); the write
	// end opens at once since a reader exists.
	if p.r, err = os.OpenFile(p.path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
		p.keep, err = os.OpenFile(p.path, os.O_WRONLY, 0)
	}
	if err != nil {
		p.close()
		return nil, fmt.Errorf("log pipe: %w", err)
	}
	return p, nil
}

// copyTo copies what the agent writes to w, a line (or maxLogChunk of one) per
// write, until every write end is closed.
func (p *logPipe) copyTo(w io.Writer) {
	defer close(p.done)
	br := bufio.NewReaderSize(p.r, maxLogChunk)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			_, _ = w.Write(chunk)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// drain waits, for a while, for the lines the agent wrote before it ended.
func (p *logPipe) drain() {
	_ = p.keep.Close()
	select {
	case <-p.done:
	case <-time.After(drainTimeout):
	}
}

func (p *logPipe) close() {
	for _, f := range []*os.File{p.keep, p.r} {
		if f != nil {
			_ = f.Close()
		}
	}
	_ = os.RemoveAll(p.dir)
}

// Inside prepares the agent the supervisor started in the session t describes.
// It returns a context that ends when the supervisor dies, and the pipe to the
// supervisor's log stream (nil when there is none: the agent then logs to its
// pane only), which also receives the report of a crash. stop releases both.
func Inside(ctx context.Context, t agentconfig.Tmux) (_ context.Context, logs io.Writer, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	if sup := t.SupervisorPID; sup > 1 {
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
	if t.LogPipe == "" {
		return ctx, nil, cancel
	}
	// O_NONBLOCK: without a supervisor reading, opening fails instead of waiting.
	f, err := os.OpenFile(t.LogPipe, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ctx, nil, cancel
	}
	_ = debug.SetCrashOutput(f, debug.CrashOptions{})
	return ctx, f, func() {
		cancel()
		_ = f.Close()
	}
}

// maxEnvBytes bounds the environment handed over.
const maxEnvBytes = 1 << 20

// envPipe is the named pipe the supervisor hands the agent its environment
// through: one line of JSON, written before tmux starts. The supervisor holds
// it open for reading and writing, so that the agent's open does not wait and
// the line stays in the pipe until read (or the supervisor ends).
type envPipe struct {
	path string
	f    *os.File
	done chan struct{}
}

func newEnvPipe(dir string, environ []string) (*envPipe, error) {
	line, err := json.Marshal(environ)
	if err != nil {
		return nil, fmt.Errorf("env pipe: %w", err)
	}
	if len(line) >= maxEnvBytes {
		return nil, fmt.Errorf("env pipe: the environment is %d bytes, more than %d", len(line), maxEnvBytes)
	}
	p := &envPipe{path: filepath.Join(dir, "env"), done: make(chan struct{})}
	if err := syscall.Mkfifo(p.path, 0o600); err != nil {
		return nil, fmt.Errorf("env pipe: %w", err)
	}
	if p.f, err = os.OpenFile(p.path, os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("env pipe: %w", err)
	}
	// A line longer than the pipe's buffer is written as the agent reads it.
	go func() {
		defer close(p.done)
		_, _ = p.f.Write(append(line, '\n'))
	}()
	return p, nil
}

func (p *envPipe) close() {
	_ = p.f.Close()
	<-p.done
	_ = os.Remove(p.path)
}

// ReadEnv reads the environment the supervisor hands over at path
// (agentconfig.EnvTmuxEnvPipe) and removes the pipe, so that nobody else
// reads it.
func ReadEnv(path string) ([]string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("read the environment: %w", err)
	}
	defer func() { _ = f.Close() }()
	_ = os.Remove(path)
	line, err := bufio.NewReader(io.LimitReader(f, maxEnvBytes)).ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("read the environment: %w", err)
	}
	var environ []string
	if err := json.Unmarshal(line, &environ); err != nil {
		return nil, fmt.Errorf("read the environment: %w", err)
	}
	return environ, nil
}

// commandTimeout bounds one tmux command, startTimeout the one that starts
// the session: a tmux server that stopped answering must not hold the
// supervisor for ever.
const (
	commandTimeout = 5 * time.Second
	startTimeout   = 30 * time.Second
)

// run runs a tmux command, bounded by commandTimeout, and returns its
// output.
func run(name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	return exec.CommandContext(ctx, name, args...).Output()
}
