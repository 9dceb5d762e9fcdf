// Package process launches sandboxes as local child processes: the local stand-in
// for Fargate tasks. Each sandbox runs in its own working directory and process
// group, with its identity (and its one-time bootstrap code) in the
// environment and its env file in a private folder beside the working
// directory; Stop sends SIGTERM, then SIGKILL after the grace period.
//
// Of the launcher's own environment a sandbox gets the host variables only
// (sandboxwire.HostVariables: PATH, HOME, LANG…), never its credentials, its
// settings or the model keys it holds: what a sandbox needs beyond its
// identity is given to it explicitly (Options.Env).
package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

var _ launch.Launcher = (*Launcher)(nil)

// Options configure a Launcher.
type Options struct {
	// Command runs the sandbox: argv, e.g. {"dist/agent", "sandbox"}.
	Command []string
	// Dir holds one working directory per sandbox, with its private folder
	// (<key>.tmp) and network folder (<key>.net) beside it. They are removed
	// when the sandbox ends, as a Fargate task's storage goes with the task;
	// its log (LogDir) stays.
	Dir string
	// KeepEnded keeps an ended sandbox's folders, for tests that look at
	// what it left.
	KeepEnded bool
	// Env is added to every sandbox's environment (after the parent's host
	// variables).
	Env []string
	// OnExit, if set, is called when a sandbox process ends by itself or is stopped.
	OnExit func(launch.Exit)
	// LogDir, if set, receives each sandbox's output as <session>-<generation>.log.
	LogDir string
	// CgroupDir is a cgroup v2 directory to create each sandbox's cgroup in
	// (memory.max, cpu.max of its size); "" is the launcher's own cgroup.
	// Where it is not a writable cgroup v2 with the memory or cpu controller
	// for its children, sandboxes get no cgroup: their rlimits hold.
	CgroupDir string
	// Profile is the rights a sandbox runs with: "" the launcher's own
	// (ProfileHost), or ProfileFargate.
	Profile string
	// Rootfs, if set, is an image's root filesystem (make image) each
	// sandbox runs in: chrooted into it, Command being the image's (its
	// paths), with the host's /proc and /dev and the sandbox's own folders
	// bound in at the same paths. It needs root.
	Rootfs string
	// Network, if set, is how sandboxes that ask to be cut off from the
	// network (launch.Spec.Isolated) are; unset, their launches fail.
	Network *Network
}

// Network cuts a sandbox off from the network, where no program in it can
// undo it: it runs in a network namespace of its own (it needs
// CAP_SYS_ADMIN) whose only interface is loopback, where the launcher
// listens at the platform's addresses, forwarding each connection to the
// same address outside, and at the egress proxy's, handing each to the
// proxy as the sandbox's. A socket to anything else finds no route.
type Network struct {
	// Platform are the loopback addresses (host:port) of the platform the
	// sandbox reaches as if it were not cut off: its gateway, model gateway
	// and push channel.
	Platform []string
	// Proxy is the loopback address (host:port) of the egress proxy in the
	// sandbox's namespace: its HTTP(S)_PROXY.
	Proxy string
	// Serve serves sandbox id's connections to the proxy, accepted from l,
	// until l is closed.
	Serve func(l net.Listener, id string)
	// CA, if set, returns the certificates (PEM) sandbox id trusts besides
	// the system's: its proxy's authority.
	CA func(id string) ([]byte, error)
	// Forget, if set, is told when sandbox id has exited.
	Forget func(id string)
}

// SystemRoots is where a sandbox's system certificates are (Debian's
// bundle, the image's too).
const SystemRoots = "/etc/ssl/certs/ca-certificates.crt"

// The sandbox profiles (Options.Profile, RA_SANDBOX_PROFILE).
const (
	// ProfileHost runs a sandbox with the launcher's own rights (as root,
	// every capability: what most tests need, and the most a sandbox can do).
	ProfileHost = ""
	// ProfileFargate runs a sandbox as a Fargate task runs its container:
	// root with Docker's default capabilities and no more (no
	// CAP_SYS_ADMIN, no CAP_NET_ADMIN; its bounding set too, so nothing it
	// starts gains one) and no_new_privs, through util-linux's setpriv, its
	// tools as an unprivileged user (RA_TOOL_USER, FargateToolUser unless
	// Options.Env names one).
	ProfileFargate = "fargate"
	// FargateToolUser is who a fargate sandbox's tools run as unless told:
	// nobody's uid (the image's agent user is 10001; any uid but root's).
	FargateToolUser = "65534"
)

// FargateCapabilities are Docker's default capabilities, a Fargate
// container's (which may add only SYS_PTRACE), as setpriv names them.
var FargateCapabilities = []string{"chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap",
	"net_bind_service", "net_raw", "sys_chroot", "mknod", "audit_write", "setfcap"}

// profileCommand is command run under profile: for ProfileFargate, by
// setpriv with FargateCapabilities only.
func profileCommand(profile string, command []string) ([]string, error) {
	switch profile {
	case ProfileHost:
		return command, nil
	case ProfileFargate:
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			return nil, fmt.Errorf("process launcher: the %s profile runs sandboxes through setpriv (util-linux): %w", profile, err)
		}
		caps := "-all"
		for _, c := range FargateCapabilities {
			caps += ",+" + c
		}
		return append([]string{setpriv, "--bounding-set", caps, "--inh-caps", "-all", "--no-new-privs", "--"}, command...), nil
	default:
		return nil, fmt.Errorf("process launcher: no sandbox profile %q (want %q or %q)", profile, ProfileHost, ProfileFargate)
	}
}

// Launcher runs sandboxes as child processes.
type Launcher struct {
	o      Options
	rootfs *rootfs // nil: the host's
	cgroup string  // where sandboxes' cgroups go; "" none
	mu     sync.Mutex
	procs  map[string]*proc // by ref
	keys   map[string]string
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
	command, err := profileCommand(o.Profile, o.Command)
	if err != nil {
		return nil, err
	}
	o.Command = command
	if o.Profile == ProfileFargate && !slices.ContainsFunc(o.Env, func(kv string) bool { return strings.HasPrefix(kv, "RA_TOOL_USER=") }) {
		o.Env = append(slices.Clone(o.Env), "RA_TOOL_USER="+FargateToolUser)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("process launcher: %w", err)
	}
	l := &Launcher{o: o, cgroup: detectCgroup(o.CgroupDir), procs: map[string]*proc{}, keys: map[string]string{}}
	if o.Rootfs != "" {
		dir, err := filepath.EvalSymlinks(o.Rootfs)
		if err != nil {
			return nil, fmt.Errorf("process launcher: the image's root filesystem: %w", err)
		}
		// The command runs in the image: its programs must be there.
		if _, err := os.Stat(filepath.Join(dir, o.Command[0])); err != nil {
			return nil, fmt.Errorf("process launcher: the image's root filesystem: %w", err)
		}
		l.rootfs = &rootfs{dir: dir}
	}
	return l, nil
}

// Cgroup returns the cgroup v2 directory sandboxes' cgroups are created in,
// "" when the machine gives the launcher none (rlimits only).
func (l *Launcher) Cgroup() string { return l.cgroup }

// ImageAgent is where the image (sandbox/Dockerfile) has the agent.
const ImageAgent = "/usr/local/bin/agent"

// CommandFromEnv returns the sandbox command: RA_SANDBOX_COMMAND run by the shell
// if set, else the agent binary in sandbox mode.
func CommandFromEnv(agentPath string) []string {
	if c := strings.TrimSpace(os.Getenv("RA_SANDBOX_COMMAND")); c != "" {
		return []string{"/bin/sh", "-c", c}
	}
	return []string{agentPath, "sandbox"}
}

// EnvdSocket is where the sandbox of sessionID's launch generation serves
// envd (the E2B sandbox API): a socket in its private folder, which the
// sandbox proxy dials (sandboxwire.DialSocket: the path may be long).
func (l *Launcher) EnvdSocket(sessionID string, generation int) string {
	return filepath.Join(l.o.Dir, sessionID+"-"+strconv.Itoa(generation)+".tmp", "envd.sock")
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
	env := append(sandboxwire.HostEnv(os.Environ()), l.o.Env...)
	for k, v := range spec.Env() {
		env = append(env, k+"="+v)
	}
	env = append(env, "RA_WORKSPACE="+dir, sandboxwire.EnvFileVar+"="+filepath.Join(private, filepath.Base(sandboxwire.DefaultEnvFile)),
		sandboxwire.EnvEnvdListen+"=unix:"+l.EnvdSocket(spec.SessionID, spec.Generation))
	var isolated *isolation
	if spec.Isolated {
		var err error
		if isolated, err = l.isolate(spec, dir+".net"); err != nil {
			return "", fmt.Errorf("launch %s: %w", key, err)
		}
		env = append(env, isolated.env...)
	}
	if n := gomaxprocs(spec.Size.CPUUnits); n != "" {
		env = append(env, "GOMAXPROCS="+n)
	}
	var logFile *os.File
	if l.o.LogDir != "" {
		f, err := os.Create(filepath.Join(l.o.LogDir, key+".log"))
		if err != nil {
			isolated.close()
			return "", fmt.Errorf("launch %s: %w", key, err)
		}
		logFile = f
	}
	build := func() *exec.Cmd {
		cmd := exec.Command(l.o.Command[0], l.o.Command[1:]...)
		cmd.Dir, cmd.Env = dir, env
		if logFile != nil {
			cmd.Stdout, cmd.Stderr = logFile, logFile
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if l.rootfs != nil {
			cmd.SysProcAttr.Chroot = l.rootfs.dir
		}
		return cmd
	}
	leave := func() {}
	if l.rootfs != nil {
		var err error
		binds := []string{dir, private}
		if isolated != nil && isolated.env != nil {
			binds = append(binds, isolated.dir)
		}
		if leave, err = l.rootfs.enter(binds...); err != nil {
			if logFile != nil {
				_ = logFile.Close()
			}
			isolated.close()
			return "", fmt.Errorf("launch %s: %w", key, err)
		}
	}
	cgroup, err := makeCgroup(l.cgroup, "ra-"+key, spec.Size)
	if err != nil {
		cgroup = ""
	}
	var cmd *exec.Cmd
	var inCgroup bool
	if isolated != nil {
		err = isolated.ns.run(func() (err error) {
			cmd, inCgroup, err = start(build, cgroup)
			return err
		})
	} else {
		cmd, inCgroup, err = start(build, cgroup)
	}
	if !inCgroup && cgroup != "" {
		_ = os.Remove(cgroup)
		cgroup = ""
	}
	if err == nil {
		if err = setRlimits(cmd.Process.Pid, spec.Size); err != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			err = fmt.Errorf("resource limits: %w", err)
		}
	}
	if err != nil {
		if logFile != nil {
			_ = logFile.Close()
		}
		if cgroup != "" {
			_ = os.Remove(cgroup)
		}
		leave()
		isolated.close()
		return "", fmt.Errorf("launch %s: %w", key, err)
	}
	ref := "pid:" + strconv.Itoa(cmd.Process.Pid)
	p := &proc{cmd: cmd, done: make(chan struct{})}
	l.procs[ref] = p
	l.keys[key] = ref
	go func() {
		err := cmd.Wait()
		// The agent's tmux server (socket named as its session) runs apart
		// from the process tree: it goes with its sandbox.
		root := ""
		if l.rootfs != nil {
			root = l.rootfs.dir
		}
		killTmux(spec.TmuxSessionName, root, cmd.Process.Pid)
		leave()
		isolated.close()
		if logFile != nil {
			_ = logFile.Close()
		}
		detail := fmt.Sprint(err)
		var killed *exec.ExitError
		if errors.As(err, &killed) && killed.ExitCode() == -1 && oomKilled(cgroup) {
			// Killed by a signal, and its cgroup's memory.max killed: what
			// ECS calls the container's OutOfMemoryError.
			detail = launch.OOMReason + ": the sandbox was killed for its memory (memory.max); " + detail
		}
		if cgroup != "" {
			_ = os.Remove(cgroup) // empty once its processes are gone
		}
		if !l.o.KeepEnded {
			for _, d := range []string{dir, private, dir + ".net"} {
				_ = os.RemoveAll(d) // best effort: a folder left takes disk, no more
			}
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
			l.o.OnExit(launch.Exit{SessionID: spec.SessionID, Generation: spec.Generation, Ref: ref, ExitCode: code, Detail: detail})
		}
	}()
	return ref, nil
}

// Stop terminates a sandbox process group: SIGTERM, then SIGKILL after grace,
// and every process the sandbox started, in whatever process group: none is
// left running after Stop.
func (l *Launcher) Stop(ctx context.Context, ref string, grace time.Duration) error {
	l.mu.Lock()
	p, ok := l.procs[ref]
	l.mu.Unlock()
	if !ok {
		return nil // already stopped, or not ours
	}
	pgid := p.cmd.Process.Pid
	// The process groups its commands run in, should the sandbox exit by
	// itself and leave one behind (orphaned, they are no longer below it).
	groups := groupsBelow(pgid)
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		for _, g := range groups {
			_ = syscall.Kill(-g, syscall.SIGKILL)
		}
		return nil
	case <-time.After(grace):
	case <-ctx.Done():
	}
	// The sandbox's commands may run in process groups of their own (a tool
	// that can be timed out alone): they go with it, frozen first so none
	// escapes by forking.
	tree := freezeTree(pgid)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	killTree(tree)
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

// tmuxName is what a sandbox's tmux session (and socket) may be called.
var tmuxName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// killTmux stops the tmux server of the sandbox's terminal session name, if
// there is one and it is the sandbox's: it daemonised out of the sandbox's
// process tree, and would outlive its agent. A server whose supervisor
// (sandboxwire.EnvTmuxSupervisorPID, in the environment it started with)
// was another process, pid not being the sandbox's, is the agent's next
// sandbox's (a resume right after a pause, its session of the same name):
// it stays. root is the image's root filesystem it ran in ("" the host's).
func killTmux(name, root string, pid int) {
	if !tmuxName.MatchString(name) {
		return
	}
	bin, err := exec.LookPath("tmux")
	if root != "" {
		// The server runs in the image, its socket in the image's /tmp.
		bin, err = "/usr/bin/tmux", nil
	}
	if err != nil {
		return
	}
	// A tmux that does not answer is not waited for: the launcher goes on.
	ctx, cancel := context.WithTimeout(context.Background(), tmuxTimeout)
	defer cancel()
	// One command to one server: whose it is and its pid, which is then
	// signalled (not the socket's name, by then perhaps another server's).
	cmd := exec.CommandContext(ctx, bin, "-L", name, "display-message", "-p", "#{pid}", ";",
		"show-environment", "-g", sandboxwire.EnvTmuxSupervisorPID)
	if root != "" {
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	}
	out, _ := cmd.Output() // no server: an error, and nothing said
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	server, err := strconv.Atoi(lines[0])
	if err != nil || server <= 1 {
		return
	}
	if len(lines) > 1 {
		if _, sup, ok := strings.Cut(lines[1], "="); ok && sup != strconv.Itoa(pid) {
			return // the next sandbox's
		}
	}
	if syscall.Kill(server, syscall.SIGTERM) == nil {
		awaitExit(server, tmuxTimeout)
	}
}

// tmuxTimeout bounds one tmux command of the launcher's.
const tmuxTimeout = 5 * time.Second
