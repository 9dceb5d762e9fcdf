// Package provision makes a sandbox's workspace what its agent type declares,
// before the sandbox reports ready: the directory, a shallow clone of the
// repository (at the branch the task or the type names), the snapshot its
// configuration saved restored over it (Extract), the task context as a
// file, the configuration's env files, then the setup commands in order,
// each bounded by the setup timeout and killed with its process group when
// it runs over, and last the configuration's service commands, started in
// the background. Each phase is an event. Nothing that fails here stops the agent: a failed clone leaves
// an empty workspace, a failed or timed-out command skips the others, and
// the workspace is reported degraded with a warning for each.
package provision

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/sandbox/toolenv"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Options say where and as whom provisioning runs, and where its events go.
type Options struct {
	// Dir is the workspace (/workspace in the image, a per-session
	// directory locally).
	Dir string
	// Env is the environment of git and the setup commands; nil: the
	// agent's own (tests).
	Env []string
	// User runs them (nil: the agent's own user).
	User *toolenv.User
	// Emit appends events in order; events that cannot be sent are logged.
	// Provisioning sends them in batches: those that say what happened are
	// sent with the next that says a phase begins, before the phase's work,
	// and with workspace.ready.
	Emit func(context.Context, ...sandboxwire.Payload) error
	// Secrets are hidden from the warnings, events and logs.
	Secrets *redact.Secrets
	Log     *slog.Logger
	// Values are the env values persisted for the session's configuration,
	// for its env files.
	Values map[string]string
	// Services keeps the service commands started, for the caller to stop.
	Services *Services
	// Tmux, when the agent runs inside tmux, names its session: each service
	// gets a window there showing its output.
	Tmux string
	// HTTP downloads the snapshot (nil: a default client); Limits bound what
	// it unpacks to.
	HTTP   *http.Client
	Limits Limits
	// Prepared is what a warm pool sandbox provisioned before its claim
	// (Prepare): when it is of the spec Run is given, its clone and setup
	// commands are not run again, and its events are replayed; otherwise
	// the workspace is emptied first and provisioned as usual.
	Prepared *Prepared
}

// maxOutput bounds what is kept of a failed command's output for its
// warning (its tail).
const maxOutput = 512

// privateDir is the workspace's own folder for the platform's files (the
// task context, a clone in progress), kept out of the repository's status.
var privateDir = filepath.Dir(sandboxwire.TaskFile)

// Run provisions the workspace spec ws describes and returns how it went,
// after its workspace.ready event. A nil ws is no workspace (status none).
func Run(ctx context.Context, ws *sandboxwire.WorkspaceSpec, o Options) sandboxwire.WorkspaceStatus {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if ws == nil {
		return sandboxwire.WorkspaceStatus{Status: sandboxwire.WorkspaceNone, Warnings: []string{}}
	}
	p := &provisioner{o: o, timeout: time.Duration(max(ws.SetupTimeoutSeconds, 1)) * time.Second}
	p.emit(ctx, sandboxwire.WorkspaceCreating{})
	prepared := o.Prepared != nil && o.Prepared.of(ws)
	if o.Prepared != nil && !prepared {
		// Prepared for another spec (a task's branch, a saved configuration):
		// what it left goes, and the workspace is provisioned from scratch.
		if err := empty(o.Dir); err != nil {
			p.warn(ctx, "workspace", fmt.Sprintf("the prepared workspace could not be emptied: %v", err))
			return p.done(ctx)
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		p.warn(ctx, "workspace", fmt.Sprintf("the workspace directory could not be made: %v", err))
		return p.done(ctx)
	}
	if prepared {
		// Cloned and set up before the claim: what it said is the session's.
		for _, e := range o.Prepared.events {
			p.emit(ctx, e)
		}
		p.warnings = slices.Clone(o.Prepared.warnings)
		ws = o.Prepared.rest(ws)
	}
	switch {
	case ws.RepositoryURL != "" && ws.NoCheckout:
		p.initRepo(ctx, ws)
	case ws.RepositoryURL != "":
		p.clone(ctx, ws)
	}
	saved := ws.Saved
	if saved != nil && saved.Snapshot != nil {
		p.restore(ctx, saved.Snapshot)
	}
	if ws.Task != nil {
		if err := p.writeTask(ws.Task); err != nil {
			p.warn(ctx, "task_context", fmt.Sprintf("the task context could not be written: %v", err))
		}
	}
	if saved != nil && len(saved.EnvFiles) > 0 {
		p.writeEnvFiles(ctx, saved.EnvFiles)
	}
	p.setup(ctx, ws.SetupCommands)
	if saved != nil && len(saved.Services) > 0 {
		p.startServices(ctx, saved.Services)
	}
	return p.done(ctx)
}

// setup runs the setup commands in order in the workspace; the first that
// fails (or times out) skips the rest, with a warning.
func (p *provisioner) setup(ctx context.Context, commands []string) {
	for i, command := range commands {
		p.begin(ctx, sandboxwire.WorkspaceSetup{Command: p.o.Secrets.String(command), Index: i + 1, Total: len(commands)})
		if err := p.run(ctx, p.o.Dir, nil, "bash", "-c", command); err != nil {
			msg := fmt.Sprintf("setup command %d of %d (%s) %v", i+1, len(commands), command, err)
			if rest := len(commands) - i - 1; rest > 0 {
				msg += fmt.Sprintf("; the %d command(s) after it were skipped", rest)
			}
			p.warn(ctx, "setup", msg)
			break
		}
	}
}

type provisioner struct {
	o        Options
	timeout  time.Duration
	warnings []string
	// degraded: the workspace itself could not be provisioned (a warning of
	// the clone or the workspace phase), not only part of its setup.
	degraded bool
	// record, if set, keeps the events instead of emitting them (Prepare).
	record *[]sandboxwire.Payload
	// pending are the events emitted and not sent yet (flush).
	pending []sandboxwire.Payload
}

// emit queues an event, sent with the next phase's (begin) or at the end.
func (p *provisioner) emit(_ context.Context, e sandboxwire.Payload) {
	if p.record != nil {
		*p.record = append(*p.record, e)
		return
	}
	p.pending = append(p.pending, e)
}

// begin emits the event of a phase that is about to do work and sends it,
// with the events queued before it, before the work starts: viewers see
// the phase while it runs.
func (p *provisioner) begin(ctx context.Context, e sandboxwire.Payload) {
	p.emit(ctx, e)
	p.flush(ctx)
}

// flush sends the queued events in one request.
func (p *provisioner) flush(ctx context.Context) {
	batch := p.pending
	p.pending = nil
	if len(batch) == 0 || p.o.Emit == nil {
		return
	}
	if err := p.o.Emit(ctx, batch...); err != nil {
		types := make([]string, len(batch))
		for i, e := range batch {
			types[i] = e.EventType()
		}
		p.o.Log.Warn("workspace events not sent", slog.String("types", strings.Join(types, ",")), slog.String("error", err.Error()))
	}
}

// warn records a warning (secrets hidden, bounded) and appends its event.
func (p *provisioner) warn(ctx context.Context, phase, msg string) {
	msg = p.o.Secrets.String(msg)
	if len(msg) > sandboxwire.MaxWorkspaceWarningBytes {
		msg = strings.ToValidUTF8(msg[:sandboxwire.MaxWorkspaceWarningBytes-3], "") + "…"
	}
	if len(p.warnings) < sandboxwire.MaxWorkspaceWarnings {
		p.warnings = append(p.warnings, msg)
	}
	if phase == "clone" || phase == "workspace" {
		p.degraded = true
	}
	p.o.Log.Warn("workspace provisioning", slog.String("phase", phase), slog.String("warning", msg))
	p.emit(ctx, sandboxwire.WorkspaceWarning{Phase: phase, Message: msg})
}

func (p *provisioner) done(ctx context.Context) sandboxwire.WorkspaceStatus {
	// A setup that failed in part is ready with its warnings (the spec's
	// partial setup); a workspace that could not be provisioned at all is
	// degraded.
	st := sandboxwire.WorkspaceStatus{Status: sandboxwire.WorkspaceReady, Warnings: p.warnings}
	if p.degraded {
		st.Status = sandboxwire.WorkspaceDegraded
	}
	if len(p.warnings) == 0 {
		st.Warnings = []string{}
	}
	p.begin(ctx, sandboxwire.WorkspaceReadyEvent{WorkspaceStatus: st})
	return st
}

// clone clones the repository, shallow (whole from a server that cannot
// clone shallow), at the branch, into a folder of the workspace, then moves
// it into place: the workspace may already hold files
// (a local env file, say). A clone that fails leaves the workspace as it was.
func (p *provisioner) clone(ctx context.Context, ws *sandboxwire.WorkspaceSpec) {
	shown := sandboxwire.RedactURL(ws.RepositoryURL)
	p.begin(ctx, sandboxwire.WorkspaceCloning{RepositoryURL: shown, Branch: ws.Branch})
	// The platform checked the URL; the sandbox checks it again, and git
	// itself refuses every transport but the URL's own.
	if !p.checkRepo(ctx, ws, "cloned") {
		return
	}
	scheme, _, _ := strings.Cut(ws.RepositoryURL, "://")
	reach, err := reachable(ctx, ws.RepositoryURL, ws.InsecureHosts)
	if err != nil {
		p.warn(ctx, "clone", "the repository was not cloned: its host "+err.Error())
		return
	}
	private := filepath.Join(p.o.Dir, privateDir)
	if err := os.MkdirAll(private, 0o755); err != nil {
		p.warn(ctx, "clone", fmt.Sprintf("the repository was not cloned: %v", err))
		return
	}
	if err := p.o.User.Own(private); err != nil {
		p.warn(ctx, "clone", fmt.Sprintf("the repository was not cloned: %v", err))
		return
	}
	tmp, err := os.MkdirTemp(private, "clone-")
	if err == nil {
		err = p.o.User.Own(tmp)
	}
	if err != nil {
		p.warn(ctx, "clone", fmt.Sprintf("the repository was not cloned: %v", err))
		return
	}
	defer func() {
		_ = os.RemoveAll(tmp)
		_ = os.Remove(private) // only if empty: a failed clone leaves the workspace empty
	}()
	cloneArgs := func(depth ...string) []string {
		args := append([]string{"-c", "protocol.allow=never", "-c", "protocol." + scheme + ".allow=always"}, reach...)
		args = append(append(append(args, "clone"), depth...), "--single-branch", "--no-recurse-submodules", "--quiet")
		if ws.Branch != "" {
			args = append(args, "--branch", ws.Branch)
		}
		return append(args, "--", ws.RepositoryURL, tmp)
	}
	gitEnv := []string{"GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL=" + scheme, "GIT_CONFIG_NOSYSTEM=1", "GIT_ASKPASS=/bin/false", "SSH_ASKPASS=/bin/false"}
	err = p.run(ctx, p.o.Dir, gitEnv, "git", cloneArgs("--depth", "1")...)
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "shallow") {
		// A server that cannot serve a shallow clone (a "dumb" HTTP one,
		// plain files; one that refuses shallow clients): clone it whole.
		p.o.Log.InfoContext(ctx, "the repository's server cannot clone shallow: cloning it whole", slog.String("repository", shown))
		if err = os.RemoveAll(tmp); err == nil {
			if err = os.Mkdir(tmp, 0o700); err == nil {
				err = p.o.User.Own(tmp)
			}
		}
		if err == nil {
			err = p.run(ctx, p.o.Dir, gitEnv, "git", cloneArgs()...)
		}
	}
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), ws.RepositoryURL, shown)
		what := "the repository " + shown
		if ws.Branch != "" {
			what += " at branch " + ws.Branch
		}
		p.warn(ctx, "clone", what+" could not be cloned ("+msg+"); the agent works in an empty workspace")
		return
	}
	if err := moveInto(tmp, p.o.Dir); err != nil {
		p.warn(ctx, "clone", fmt.Sprintf("the clone could not be put in place: %v", err))
		return
	}
	p.excludePrivate()
}

// excludePrivate keeps the platform's folder out of the repository's
// changes.
func (p *provisioner) excludePrivate() {
	exclude := filepath.Join(p.o.Dir, ".git", "info", "exclude")
	if f, err := os.OpenFile(exclude, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644); err == nil { //nolint:gosec // git's own mode for it: the tools' user reads it
		_, _ = fmt.Fprintf(f, "\n/%s/\n", privateDir)
		_ = f.Close()
	}
}

// checkRepo checks ws's repository URL and branch before git sees them,
// and warns that the repository was not done (cloned, set up) if either is
// wrong.
func (p *provisioner) checkRepo(ctx context.Context, ws *sandboxwire.WorkspaceSpec, done string) bool {
	if err := sandboxwire.CheckCloneURL(ws.RepositoryURL, ws.InsecureHosts); err != nil {
		p.warn(ctx, "clone", "the repository was not "+done+": its URL "+err.Error())
		return false
	}
	if ws.Branch != "" && !sandboxwire.ValidBranch(ws.Branch) {
		p.warn(ctx, "clone", "the repository was not "+done+": the branch is not a branch name")
		return false
	}
	return true
}

// initRepo makes the workspace a repository with nothing checked out
// (checkout_on_start false): the repository is its origin and the branch,
// when there is one, its own branch tracking origin's, so that a git pull
// checks it out when the agent needs it. Nothing is fetched: the workspace
// is ready at once.
func (p *provisioner) initRepo(ctx context.Context, ws *sandboxwire.WorkspaceSpec) {
	shown := sandboxwire.RedactURL(ws.RepositoryURL)
	if !p.checkRepo(ctx, ws, "set up") {
		return
	}
	git := [][]string{{"init", "--quiet"}, {"remote", "add", "origin", ws.RepositoryURL}}
	if ws.Branch != "" {
		git = append(git, []string{"symbolic-ref", "HEAD", "refs/heads/" + ws.Branch},
			[]string{"config", "branch." + ws.Branch + ".remote", "origin"},
			[]string{"config", "branch." + ws.Branch + ".merge", "refs/heads/" + ws.Branch})
	}
	env := []string{"GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1"}
	for _, args := range git {
		if err := p.run(ctx, p.o.Dir, env, "git", args...); err != nil {
			msg := strings.ReplaceAll(err.Error(), ws.RepositoryURL, shown)
			p.warn(ctx, "clone", "the repository "+shown+" was not set up ("+msg+"); the agent works in an empty workspace")
			return
		}
	}
	p.excludePrivate()
	p.o.Log.InfoContext(ctx, "repository set up without a checkout (checkout_on_start false)", slog.String("repository", shown), slog.String("branch", ws.Branch))
}

// resolver resolves a repository's host: the system's resolver; tests
// give names of their own (export_test.go).
type resolver func(ctx context.Context, host string) ([]netip.Addr, error)

var lookup atomic.Pointer[resolver]

func lookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	if r := lookup.Load(); r != nil {
		return (*r)(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// reachable returns the git options that keep a clone of raw (a URL
// CheckCloneURL accepted) on the addresses checked here. Redirects are never
// followed: they could lead anywhere. A host the operator lists (trusted:
// git_insecure_hosts) is cloned from as it resolves. Any other is resolved
// here, refused if one of its addresses is internal
// (sandboxwire.InternalAddress: loopback, private, link-local, the cloud's
// metadata service…), and pinned to those addresses for git
// (http.curloptResolve), so that a second answer of its DNS cannot send git
// elsewhere.
func reachable(ctx context.Context, raw string, trusted []string) ([]string, error) {
	opts := []string{"-c", "http.followRedirects=false"}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("is not valid")
	}
	host := strings.ToLower(u.Hostname())
	if slices.Contains(trusted, host) || (u.Scheme != "https" && u.Scheme != "http") {
		return opts, nil // git:// reaches the trusted hosts only (CheckCloneURL)
	}
	addrs, err := lookupIP(ctx, host)
	if err != nil || len(addrs) == 0 {
		return nil, errors.New("could not be resolved")
	}
	pins := make([]string, len(addrs))
	for i, a := range addrs {
		if sandboxwire.InternalAddress(a) {
			return nil, fmt.Errorf("resolves to an internal address (%s), which only the hosts the operator lists (git_insecure_hosts) may", a.Unmap())
		}
		pins[i] = a.Unmap().String()
		if a.Unmap().Is6() {
			pins[i] = "[" + pins[i] + "]"
		}
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return append(opts, "-c", "http.curloptResolve="+host+":"+port+":"+strings.Join(pins, ",")), nil
}

// moveInto moves every entry of from into to (the same file system).
func moveInto(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return fmt.Errorf("move %s: %w", e.Name(), errors.Unwrap(err))
		}
	}
	return nil
}

// writeTask writes the task context to TaskFile, the tools' user's to read.
func (p *provisioner) writeTask(t *sandboxwire.TaskContext) error {
	path := filepath.Join(p.o.Dir, sandboxwire.TaskFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		return err
	}
	if err := p.o.User.Own(filepath.Dir(path)); err != nil {
		return err
	}
	return p.o.User.Own(path)
}

// run runs one command in dir, as the tools' user with their environment
// (plus extra), bounded by the setup timeout: past it, its whole process
// group is killed. Its error says how it ended, with its output's tail.
func (p *provisioner) run(ctx context.Context, dir string, extra []string, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	env := p.o.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(append([]string{}, env...), extra...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.o.User.Credential()}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	out := &tail{}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("timed out after %s and was killed", p.timeout)
	case errors.As(err, &exit):
		return fmt.Errorf("failed with exit code %d%s", exit.ExitCode(), out.suffix())
	default:
		return fmt.Errorf("could not run: %w", err)
	}
}

// tail keeps the last maxOutput bytes written to it.
type tail struct{ buf []byte }

func (t *tail) Write(b []byte) (int, error) {
	t.buf = append(t.buf, b...)
	if len(t.buf) > maxOutput {
		t.buf = t.buf[len(t.buf)-maxOutput:]
	}
	return len(b), nil
}

func (t *tail) suffix() string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(bytes.TrimSpace(t.buf)), ""))
	if s == "" {
		return ""
	}
	return ": " + s
}
