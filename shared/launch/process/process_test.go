package process_test

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/launch/launchtest"
	"github.com/remote-agents/remote-agents/shared/launch/process"
	"github.com/remote-agents/remote-agents/shared/tasksize"
)

// A sandbox script reports "pid:<its pid>|<its identity>" on the ready pipe once
// its signal trap is installed; tests wait for that line, never for a while.
const report = `echo "pid:$$|$PROLIFERATE_SESSION_ID|$RA_GENERATION|$PROLIFERATE_GATEWAY_URL|$RA_BOOTSTRAP_CODE|$RA_TMUX_SESSION_NAME" > "$READY"`

// ready is a named pipe sandboxes report on, and the lines they reported, by ref.
type ready struct {
	path  string
	mu    sync.Mutex
	lines map[string]string
	seen  map[string]chan struct{}
}

func newReady(t *testing.T) *ready {
	t.Helper()
	r := &ready{path: filepath.Join(t.TempDir(), "ready"), lines: map[string]string{}, seen: map[string]chan struct{}{}}
	if err := syscall.Mkfifo(r.path, 0o600); err != nil {
		t.Fatal(err)
	}
	// Opened for reading and writing, the pipe never blocks an opener and never
	// reads end-of-file between writers.
	f, err := os.OpenFile(r.path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			ref, rest, _ := strings.Cut(sc.Text(), "|")
			r.mu.Lock()
			r.lines[ref] = rest
			close(r.chanFor(ref))
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = f.Close()
		<-done
	})
	return r
}

func (r *ready) chanFor(ref string) chan struct{} {
	ch, ok := r.seen[ref]
	if !ok {
		ch = make(chan struct{})
		r.seen[ref] = ch
	}
	return ch
}

// wait waits for the sandbox ref's line and returns the identity it reported.
func (r *ready) wait(t *testing.T, ref string) map[string]string {
	t.Helper()
	r.mu.Lock()
	ch := r.chanFor(ref)
	r.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("sandbox %s never reported ready", ref)
	}
	r.mu.Lock()
	fields := strings.Split(r.lines[ref], "|")
	r.mu.Unlock()
	env := map[string]string{}
	for i, k := range []string{"PROLIFERATE_SESSION_ID", "RA_GENERATION", "PROLIFERATE_GATEWAY_URL", "RA_BOOTSTRAP_CODE", "RA_TMUX_SESSION_NAME"} {
		if i < len(fields) {
			env[k] = fields[i]
		}
	}
	return env
}

type exits struct {
	ch chan launch.Exit
}

func (e *exits) record(x launch.Exit) { e.ch <- x }

// newLauncher runs script as every sandbox, with READY naming the ready pipe.
func newLauncher(t *testing.T, script string) (*process.Launcher, *ready, *exits, string) {
	t.Helper()
	dir := t.TempDir()
	r := newReady(t)
	ex := &exits{ch: make(chan launch.Exit, 16)}
	l, err := process.New(process.Options{Command: []string{"/bin/sh", "-c", script}, Dir: dir, LogDir: dir, OnExit: ex.record, Env: []string{"READY=" + r.path}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.StopAll(time.Second) })
	return l, r, ex, dir
}

func TestLauncherContract(t *testing.T) {
	t.Parallel()
	launchtest.Run(t, func(t *testing.T) launchtest.Harness {
		l, r, _, _ := newLauncher(t, `trap 'exit 0' TERM; `+report+`; sleep 600 & wait`)
		return launchtest.Harness{Launcher: l, Up: r.wait, Running: l.Running}
	})
}

func TestSandboxGetsItsIdentityAndNoSecrets(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "platform-secret")
	t.Setenv("RA_DEV_APP_KEY", "platform-app-key")
	t.Setenv("GITHUB_TOKEN", "ghp_platform")
	// The model providers' keys stay with the platform (the model gateway).
	for _, k := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY"} {
		t.Setenv(k, "platform-"+k)
	}
	dir, out := t.TempDir(), t.TempDir()
	ex := &exits{ch: make(chan launch.Exit, 1)}
	// The sandbox writes what it sees outside its workspace, which goes
	// with it.
	l, err := process.New(process.Options{Dir: dir, OnExit: ex.record, Env: []string{"OUT=" + out}, Command: []string{"/bin/sh", "-c",
		`echo "$PROLIFERATE_SESSION_ID $RA_GENERATION $PROLIFERATE_GATEWAY_URL $RA_BOOTSTRAP_CODE $RA_MODEL_GATEWAY_URL" > "$OUT/identity"; pwd > "$OUT/where"; echo "$RA_ENV_FILE" > "$OUT/envfile"; ` +
			`stat -c %a "$(dirname "$RA_ENV_FILE")" > "$OUT/private"; ` +
			`echo "$AWS_SECRET_ACCESS_KEY$RA_DEV_APP_KEY$ANTHROPIC_API_KEY$OPENAI_API_KEY$GEMINI_API_KEY$GOOGLE_API_KEY$MISTRAL_API_KEY$GITHUB_TOKEN" > "$OUT/secrets"; exit 3`}})
	if err != nil {
		t.Fatal(err)
	}
	spec := launch.Spec{SessionID: "s1", Generation: 2, GatewayURL: "http://127.0.0.1:1", ModelGatewayURL: "http://127.0.0.1:2", BootstrapCode: "rbc_t"}
	ref, err := l.Launch(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	x := <-ex.ch
	if x.SessionID != "s1" || x.Generation != 2 || x.ExitCode != 3 || x.Ref != ref {
		t.Errorf("exit %+v", x)
	}
	work := filepath.Join(dir, "s1-2")
	id, err := os.ReadFile(filepath.Join(out, "identity"))
	if err != nil || strings.TrimSpace(string(id)) != "s1 2 http://127.0.0.1:1 rbc_t http://127.0.0.1:2" {
		t.Errorf("identity %q, %v", id, err)
	}
	if secrets, _ := os.ReadFile(filepath.Join(out, "secrets")); strings.TrimSpace(string(secrets)) != "" {
		t.Errorf("sandbox inherited the platform's secrets: %q", secrets)
	}
	if where, _ := os.ReadFile(filepath.Join(out, "where")); strings.TrimSpace(string(where)) != work {
		t.Errorf("ran in %q, want %q", where, work)
	}
	// Its env file is its own (sandboxes share this machine's /tmp), outside its
	// workspace, in a folder only it may enter.
	envFile, _ := os.ReadFile(filepath.Join(out, "envfile"))
	private := filepath.Join(dir, "s1-2.tmp")
	if got := strings.TrimSpace(string(envFile)); got != filepath.Join(private, ".proliferate_env.json") {
		t.Errorf("env file %q, want one in %s", got, private)
	}
	if mode, _ := os.ReadFile(filepath.Join(out, "private")); strings.TrimSpace(string(mode)) != "700" {
		t.Errorf("env file folder's mode %q, want 700", mode)
	}
}

// TestEndedSandboxLeavesNoFolders: a sandbox's workspace and private
// folder go with it, whether it exits or is stopped (as a Fargate task's
// storage does); its log stays. KeepEnded keeps them.
func TestEndedSandboxLeavesNoFolders(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		dir := t.TempDir()
		r := newReady(t)
		ex := &exits{ch: make(chan launch.Exit, 2)}
		l, err := process.New(process.Options{Dir: dir, LogDir: dir, KeepEnded: keep, OnExit: ex.record, Env: []string{"READY=" + r.path},
			Command: []string{"/bin/sh", "-c", `head -c 1048576 /dev/zero > data.bin; echo x > "$(dirname "$RA_ENV_FILE")/left"; echo bye; ` +
				`[ "$PROLIFERATE_SESSION_ID" = exits ] && exit 0; trap 'exit 0' TERM; ` + report + `; sleep 600 & wait`}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Launch(t.Context(), launch.Spec{SessionID: "exits", Generation: 1}); err != nil {
			t.Fatal(err)
		}
		<-ex.ch
		ref, err := l.Launch(t.Context(), launch.Spec{SessionID: "stopped", Generation: 1})
		if err != nil {
			t.Fatal(err)
		}
		r.wait(t, ref)
		if err := l.Stop(t.Context(), ref, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		<-ex.ch
		for _, key := range []string{"exits-1", "stopped-1"} {
			for _, folder := range []string{key, key + ".tmp"} {
				_, err := os.Stat(filepath.Join(dir, folder))
				if gone := errors.Is(err, fs.ErrNotExist); gone == keep {
					t.Errorf("keep %v: %s: %v", keep, folder, err)
				}
			}
			if b, err := os.ReadFile(filepath.Join(dir, key+".log")); err != nil || !strings.Contains(string(b), "bye") {
				t.Errorf("keep %v: %s.log: %q %v", keep, key, b, err)
			}
		}
	}
}

func TestStopEscalatesToKill(t *testing.T) {
	t.Parallel()
	// The sandbox ignores SIGTERM: Stop must kill it after the grace period.
	l, r, ex, _ := newLauncher(t, `trap '' TERM; `+report+`; sleep 600 & wait`)
	ref, err := l.Launch(t.Context(), launch.Spec{SessionID: "s2", Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.wait(t, ref)
	const grace = 300 * time.Millisecond
	began := time.Now()
	if err := l.Stop(t.Context(), ref, grace); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < grace {
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
	l, r, ex, _ := newLauncher(t, `trap 'exit 0' TERM; `+report+`; sleep 600 & wait`)
	ref, err := l.Launch(t.Context(), launch.Spec{SessionID: "s3", Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.wait(t, ref)
	if err := l.Stop(t.Context(), ref, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if x := <-ex.ch; x.ExitCode != 0 {
		t.Errorf("exit %+v, want a clean exit on SIGTERM", x)
	}
}

// TestSandboxRunsWithinItsSize: a sandbox's size is held on its process as
// this machine can: RLIMIT_DATA for memory and RLIMIT_FSIZE for disk, which
// what it starts inherits (the sandbox reads them from /proc/self/limits of a
// command it runs), and GOMAXPROCS for its vCPUs. A sandbox without a size
// keeps the launcher's limits.
func TestSandboxRunsWithinItsSize(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	// The sandbox reads its limits once the test has seen Launch return.
	dir := t.TempDir()
	ex := &exits{ch: make(chan launch.Exit, 2)}
	l, err := process.New(process.Options{Command: []string{"/bin/sh", "-c", `read x < "$GO"; cat /proc/self/limits > limits; echo "$GOMAXPROCS" > procs`},
		Dir: dir, KeepEnded: true, Env: []string{"GO=" + gate}, OnExit: ex.record})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.StopAll(time.Second) })
	sized := launch.Spec{SessionID: "sized", Generation: 1, Size: tasksize.Size{CPUUnits: 2048, MemoryMiB: 4096, DiskGiB: 30}}
	plain := launch.Spec{SessionID: "plain", Generation: 1}
	for _, spec := range []launch.Spec{sized, plain} {
		if _, err := l.Launch(t.Context(), spec); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(gate, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.WriteString("go\n")
		_ = f.Close()
		if x := <-ex.ch; x.ExitCode != 0 {
			t.Fatalf("sandbox %+v", x)
		}
	}
	limit := func(id, name string) string {
		raw, err := os.ReadFile(filepath.Join(dir, id+"-1", "limits"))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(raw), "\n") {
			if rest, ok := strings.CutPrefix(line, name); ok {
				f := strings.Fields(rest)
				return f[0] + " " + f[1]
			}
		}
		t.Fatalf("no %s in %s", name, raw)
		return ""
	}
	if got, want := limit("sized", "Max data size"), "4294967296 4294967296"; got != want {
		t.Errorf("data size limit %q, want %q", got, want)
	}
	if got, want := limit("sized", "Max file size"), "32212254720 32212254720"; got != want {
		t.Errorf("file size limit %q, want %q", got, want)
	}
	if procs, _ := os.ReadFile(filepath.Join(dir, "sized-1", "procs")); strings.TrimSpace(string(procs)) != "2" {
		t.Errorf("GOMAXPROCS %q, want 2", procs)
	}
	var own syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_DATA, &own); err != nil {
		t.Fatal(err)
	}
	if got := limit("plain", "Max data size"); own.Cur == ^uint64(0) && got != "unlimited unlimited" {
		t.Errorf("a sandbox without a size got data size limit %q", got)
	}
	if procs, _ := os.ReadFile(filepath.Join(dir, "plain-1", "procs")); strings.TrimSpace(string(procs)) != "" {
		t.Errorf("GOMAXPROCS %q for a sandbox without a size", procs)
	}
}

// TestStopLeavesNoCommandBehind: a sandbox's commands in process groups of
// their own (as its tools run) go with it, whether it is killed (no grace)
// or exits by itself on SIGTERM and leaves them.
func TestStopLeavesNoCommandBehind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, trap string
		grace      time.Duration
	}{
		{"killed", `trap '' TERM`, 0},
		{"graceful", `trap 'exit 0' TERM`, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "cmd.pid")
			// setsid puts the command in a session and process group of its own.
			script := tc.trap + `; setsid sh -c 'echo $$ > ` + pidFile + `.tmp; mv ` + pidFile + `.tmp ` + pidFile + `; exec sleep 600' & ` +
				`while [ ! -s ` + pidFile + ` ]; do sleep 0.05; done; ` + report + `; wait`
			l, r, _, _ := newLauncher(t, script)
			ref, err := l.Launch(t.Context(), launch.Spec{SessionID: "s-" + tc.name, Generation: 1})
			if err != nil {
				t.Fatal(err)
			}
			r.wait(t, ref)
			raw, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatal(err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			if err := l.Stop(t.Context(), ref, tc.grace); err != nil {
				t.Fatal(err)
			}
			// The command is killed, then reaped by init: wait for it to be
			// gone, not for a while.
			deadline := time.Now().Add(30 * time.Second) // a bound on failure, not a window
			for syscall.Kill(pid, 0) == nil && !zombie(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("the sandbox's command %d outlived Stop", pid)
				}
				runtime.Gosched()
			}
		})
	}
}

// zombie reports whether pid is dead, waiting to be reaped.
func zombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	rest := string(stat)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	return len(f) > 0 && f[0] == "Z"
}

// TestStopEndsTheSandboxTmuxServer: the agent's tmux server daemonises out
// of the sandbox's process tree; when the sandbox stops, its server (the
// socket named as its terminal session) goes too, whether its supervisor
// named itself or nothing did. A server of that name that the next sandbox's
// supervisor started (a resume right after a pause) stays.
func TestStopEndsTheSandboxTmuxServer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, supervisor string
		stays            bool
	}{
		{"unnamed", "", false},
		{"its own", "RA_TMUX_SUPERVISOR_PID=$$ ", false},
		{"the next sandbox's", "RA_TMUX_SUPERVISOR_PID=1 ", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := "ra-t" + strconv.Itoa(os.Getpid()) + strconv.Itoa(i) + strconv.FormatInt(time.Now().UnixNano()%1_000_000, 10)
			t.Cleanup(func() { _ = exec.Command("tmux", "-L", name, "kill-server").Run() })
			script := tt.supervisor + `tmux -L "$RA_TMUX_SESSION_NAME" -f /dev/null new-session -d -s x 'sleep 600' && ` + report + `; exec sleep 600`
			l, r, ex, _ := newLauncher(t, script)
			ref, err := l.Launch(t.Context(), launch.Spec{SessionID: "s-tmux", Generation: 1, TmuxSessionName: name})
			if err != nil {
				t.Fatal(err)
			}
			r.wait(t, ref)
			if err := exec.Command("tmux", "-L", name, "has-session", "-t", "x").Run(); err != nil {
				t.Fatalf("the sandbox's tmux server is not up: %v", err)
			}
			if err := l.Stop(t.Context(), ref, 0); err != nil {
				t.Fatal(err)
			}
			<-ex.ch // the exit is reported once the server was stopped
			if up := exec.Command("tmux", "-L", name, "has-session", "-t", "x").Run() == nil; up != tt.stays {
				t.Errorf("the tmux server up after the sandbox: %v, want %v", up, tt.stays)
			}
		})
	}
}

// TestFargateProfileHasDockersCapabilities: a sandbox of the fargate
// profile runs with Docker's default capabilities (effective and bounding:
// 0xa80425fb, no CAP_SYS_ADMIN), no_new_privs, and so cannot make a network
// namespace; an unknown profile is refused.
func TestFargateProfileHasDockersCapabilities(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ex := &exits{ch: make(chan launch.Exit, 1)}
	l, err := process.New(process.Options{Profile: process.ProfileFargate, Dir: dir, KeepEnded: true, OnExit: ex.record, Command: []string{"/bin/sh", "-c",
		`grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status > status; if unshare -n true 2>/dev/null; then echo made > netns; else echo refused > netns; fi`}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.StopAll(time.Second) })
	if _, err := l.Launch(t.Context(), launch.Spec{SessionID: "fargate", Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if x := <-ex.ch; x.ExitCode != 0 {
		t.Fatalf("sandbox %+v", x)
	}
	status, err := os.ReadFile(filepath.Join(dir, "fargate-1", "status"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(status)), "\n") {
		k, v, _ := strings.Cut(line, ":")
		got[k] = strings.TrimSpace(v)
	}
	if got["CapEff"] != "00000000a80425fb" || got["CapBnd"] != "00000000a80425fb" || got["NoNewPrivs"] != "1" {
		t.Errorf("sandbox status %v, want Docker's default capabilities and no_new_privs", got)
	}
	if netns, _ := os.ReadFile(filepath.Join(dir, "fargate-1", "netns")); strings.TrimSpace(string(netns)) != "refused" {
		t.Errorf("network namespace: %q, want refused", netns)
	}
	if _, err := process.New(process.Options{Profile: "lambda", Dir: dir, Command: []string{"true"}}); err == nil || !strings.Contains(err.Error(), "lambda") {
		t.Errorf("an unknown profile: %v", err)
	}
}
