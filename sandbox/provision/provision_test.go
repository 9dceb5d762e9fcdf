package provision_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/provision"
	"github.com/remote-agents/remote-agents/sandbox/provision/gitserve"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// recorder keeps the events provisioning appends, in order.
type recorder struct {
	mu     sync.Mutex
	events []sandboxwire.Event
	// batches are the types of each call's events, in order.
	batches [][]string
}

func (r *recorder) emit(_ context.Context, ps ...sandboxwire.Payload) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var types []string
	for _, p := range ps {
		e, err := sandboxwire.NewEvent(p)
		if err != nil {
			return err
		}
		r.events = append(r.events, e)
		types = append(types, e.Type)
	}
	r.batches = append(r.batches, types)
	return nil
}

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.Type)
	}
	return out
}

func (r *recorder) raw() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	raw, _ := json.Marshal(r.events)
	return string(raw)
}

func serve(t *testing.T) gitserve.Repo {
	return gitserve.Serve(t, "app", []string{"main", "develop"}, map[string]map[string]string{
		"main":    {"README.md": "main\n"},
		"develop": {"README.md": "develop\n", "src/dev.txt": "dev\n"},
	})
}

func run(t *testing.T, dir string, ws *sandboxwire.WorkspaceSpec, secrets ...string) (sandboxwire.WorkspaceStatus, *recorder) {
	t.Helper()
	rec := &recorder{}
	st := provision.Run(t.Context(), ws, provision.Options{Dir: dir, Emit: rec.emit, Secrets: redact.New(secrets...)})
	return st, rec
}

func read(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestCloneBranchShallowThenSetupInOrder: the task's branch of a repository
// served over HTTP on loopback is cloned, shallow, into a workspace that
// already holds a file; the task context is written; the setup commands run
// in order in the workspace; each phase is an event, in order.
func TestCloneBranchShallowThenSetupInOrder(t *testing.T) {
	repo := serve(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "already.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	task := &sandboxwire.TaskContext{RepositoryURL: repo.URL, Branch: "develop", PullRequestNumber: 42, BaseBranch: "main"}
	st, rec := run(t, dir, &sandboxwire.WorkspaceSpec{
		RepositoryURL: repo.URL, Branch: "develop", Task: task, InsecureHosts: sandboxwire.DefaultInsecureGitHosts,
		SetupCommands: []string{"echo one >> order.txt", "cat src/dev.txt >> order.txt"}, SetupTimeoutSeconds: 30,
	})
	if st.Status != sandboxwire.WorkspaceReady || len(st.Warnings) != 0 {
		t.Fatalf("status = %+v, want ready without warnings", st)
	}
	if got := read(t, filepath.Join(dir, "README.md")); got != "develop\n" {
		t.Errorf("README.md = %q, want the develop branch's", got)
	}
	if got := read(t, filepath.Join(dir, "order.txt")); got != "one\ndev\n" {
		t.Errorf("order.txt = %q, want the setup commands' output in order", got)
	}
	if got := read(t, filepath.Join(dir, "already.txt")); got != "x" {
		t.Errorf("a file the workspace held is gone: %q", got)
	}
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--is-shallow-repository").Output()
	if err != nil || strings.TrimSpace(string(out)) != "true" {
		t.Errorf("clone is not shallow: %q %v", out, err)
	}
	status, err := exec.Command("git", "-C", dir, "status", "--porcelain").Output()
	if err != nil || strings.Contains(string(status), ".remote-agent") {
		t.Errorf("the platform's folder shows in git status: %q %v", status, err)
	}
	var got sandboxwire.TaskContext
	if err := json.Unmarshal([]byte(read(t, filepath.Join(dir, sandboxwire.TaskFile))), &got); err != nil || got != *task {
		t.Errorf("task file = %+v (%v), want %+v", got, err, *task)
	}
	want := []string{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceCloning, sandboxwire.TypeWorkspaceSetup,
		sandboxwire.TypeWorkspaceSetup, sandboxwire.TypeWorkspaceReady}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	// Each phase's event goes out before its work, with what came before it.
	batches := [][]string{{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceCloning}, {sandboxwire.TypeWorkspaceSetup},
		{sandboxwire.TypeWorkspaceSetup}, {sandboxwire.TypeWorkspaceReady}}
	if !slices.EqualFunc(rec.batches, batches, slices.Equal) {
		t.Errorf("requests = %v, want %v", rec.batches, batches)
	}
	if !strings.Contains(rec.raw(), `"command":"echo one \u003e\u003e order.txt","index":1,"total":2`) {
		t.Errorf("setup events do not name their command: %s", rec.raw())
	}
}

// TestCloneFromADumbHTTPServer: a repository a plain web server serves as
// files (git's dumb protocol, which cannot clone shallow) is cloned whole,
// at the branch asked for or the default one, and the workspace is ready
// without warnings.
func TestCloneFromADumbHTTPServer(t *testing.T) {
	repo := gitserve.ServeDumb(t, "app", []string{"main", "develop"}, map[string]map[string]string{
		"main":    {"README.md": "main\n"},
		"develop": {"README.md": "develop\n", "src/dev.txt": "dev\n"},
	})
	for _, tt := range []struct{ branch, readme string }{{"develop", "develop\n"}, {"", "main\n"}} {
		dir := t.TempDir()
		st, rec := run(t, dir, &sandboxwire.WorkspaceSpec{RepositoryURL: repo.URL, Branch: tt.branch, InsecureHosts: sandboxwire.DefaultInsecureGitHosts, SetupTimeoutSeconds: 30})
		if st.Status != sandboxwire.WorkspaceReady || len(st.Warnings) != 0 {
			t.Fatalf("branch %q: status = %+v, want ready without warnings (events %s)", tt.branch, st, rec.raw())
		}
		if got := read(t, filepath.Join(dir, "README.md")); got != tt.readme {
			t.Errorf("branch %q: README.md = %q, want %q", tt.branch, got, tt.readme)
		}
		if out, err := exec.Command("git", "-C", dir, "log", "--format=%s", "-1").Output(); err != nil || !strings.Contains(string(out), "commit on") {
			t.Errorf("branch %q: the workspace is no clone: %q %v", tt.branch, out, err)
		}
	}
}

// TestNoCheckoutOnStartLeavesTheRepositoryToPull: with checkout_on_start
// false, nothing is fetched: the workspace is an empty repository whose
// origin is the repository and whose branch tracks origin's, the setup
// commands run in it, and one git pull checks the branch out.
func TestNoCheckoutOnStartLeavesTheRepositoryToPull(t *testing.T) {
	repo := serve(t)
	dir := t.TempDir()
	st, rec := run(t, dir, &sandboxwire.WorkspaceSpec{
		RepositoryURL: repo.URL, Branch: "develop", NoCheckout: true, InsecureHosts: sandboxwire.DefaultInsecureGitHosts,
		SetupCommands: []string{"git status --porcelain=v1 > ../status.txt; ls -A > ../ls.txt"}, SetupTimeoutSeconds: 30,
	})
	if st.Status != sandboxwire.WorkspaceReady || len(st.Warnings) != 0 {
		t.Fatalf("status = %+v, want ready without warnings (events %s)", st, rec.raw())
	}
	if got := read(t, filepath.Join(filepath.Dir(dir), "ls.txt")); got != ".git\n" {
		t.Errorf("the workspace at setup holds %q, want only .git: nothing checked out", got)
	}
	want := []string{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceSetup, sandboxwire.TypeWorkspaceReady}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v (no clone)", got, want)
	}
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := git("remote", "get-url", "origin"); got != repo.URL {
		t.Errorf("origin = %q, want %q", got, repo.URL)
	}
	if got := git("symbolic-ref", "--short", "HEAD"); got != "develop" {
		t.Errorf("branch = %q, want develop", got)
	}
	git("pull", "--quiet")
	if got := read(t, filepath.Join(dir, "src", "dev.txt")); got != "dev\n" {
		t.Errorf("after git pull, src/dev.txt = %q, want the develop branch's", got)
	}
	if status := git("status", "--porcelain"); status != "" {
		t.Errorf("after git pull the workspace is not clean: %q", status)
	}
}

// TestNoRepositoryIsAnEmptyWorkspace: no repository, no setup: an empty
// workspace, ready.
func TestNoRepositoryIsAnEmptyWorkspace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "workspace")
	st, rec := run(t, dir, &sandboxwire.WorkspaceSpec{SetupTimeoutSeconds: 300})
	if st.Status != sandboxwire.WorkspaceReady {
		t.Fatalf("status = %+v", st)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("workspace = %v (%v), want made and empty", entries, err)
	}
	// Nothing to wait for in between: one request.
	if got, want := rec.batches, [][]string{{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceReady}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("requests = %v, want %v", got, want)
	}
	if st, rec := run(t, dir, nil); st.Status != sandboxwire.WorkspaceNone || len(rec.types()) != 0 {
		t.Errorf("no workspace: %+v, events %v", st, rec.types())
	}
}

// TestFailingSetupCommandSkipsTheRest: a command that exits non-zero skips
// the ones after it; the workspace is degraded, with a warning that says so.
func TestFailingSetupCommandSkipsTheRest(t *testing.T) {
	dir := t.TempDir()
	st, rec := run(t, dir, &sandboxwire.WorkspaceSpec{
		SetupCommands:       []string{"echo first > first.txt", "echo broken >&2; exit 3", "echo never > never.txt"},
		SetupTimeoutSeconds: 30,
	})
	if st.Status != sandboxwire.WorkspaceReady || len(st.Warnings) != 1 {
		t.Fatalf("status = %+v, want ready with one warning (a partial setup)", st)
	}
	for _, want := range []string{"setup command 2 of 3", "exit code 3", "broken", "1 command(s) after it were skipped"} {
		if !strings.Contains(st.Warnings[0], want) {
			t.Errorf("warning %q lacks %q", st.Warnings[0], want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "never.txt")); !os.IsNotExist(err) {
		t.Errorf("the command after the failed one ran: %v", err)
	}
	want := []string{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceSetup, sandboxwire.TypeWorkspaceSetup,
		sandboxwire.TypeWorkspaceWarning, sandboxwire.TypeWorkspaceReady}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

// TestSetupCommandTimeoutKillsItsProcessGroup: a command past the setup
// timeout is killed with everything it started; degraded, with a warning.
func TestSetupCommandTimeoutKillsItsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	st, _ := run(t, dir, &sandboxwire.WorkspaceSpec{
		SetupCommands:       []string{"sleep 600 & echo $! > sleeper.pid; wait", "echo never > never.txt"},
		SetupTimeoutSeconds: 1,
	})
	if st.Status != sandboxwire.WorkspaceReady || len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "timed out after 1s") {
		t.Fatalf("status = %+v, want ready with a timeout warning", st)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(read(t, filepath.Join(dir, "sleeper.pid"))))
	if err != nil {
		t.Fatal(err)
	}
	// Dead: gone, or a zombie waiting for init. SIGKILL was sent to its group
	// when the command timed out; on a loaded machine the kernel may take a
	// moment to carry it out.
	state := func() string {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return "gone"
		}
		return strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))[0]
	}
	deadline := time.Now().Add(5 * time.Second)
	for st := state(); st != "gone" && st != "Z" && st != "X"; st = state() {
		if time.Now().After(deadline) {
			t.Errorf("the command's child %d still runs (state %s)", pid, st)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, "never.txt")); !os.IsNotExist(err) {
		t.Errorf("the command after the timed-out one ran: %v", err)
	}
}

// TestFailedCloneLeavesAnEmptyWorkspace: a repository that is not there is
// a warning and an empty workspace; the setup commands still run.
func TestFailedCloneLeavesAnEmptyWorkspace(t *testing.T) {
	repo := serve(t)
	dir := t.TempDir()
	st, rec := run(t, dir, &sandboxwire.WorkspaceSpec{
		RepositoryURL: strings.TrimSuffix(repo.URL, "app.git") + "missing.git", InsecureHosts: sandboxwire.DefaultInsecureGitHosts,
		SetupCommands: []string{"touch setup-ran"}, SetupTimeoutSeconds: 30,
	})
	if st.Status != sandboxwire.WorkspaceDegraded || len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "could not be cloned") {
		t.Fatalf("status = %+v", st)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"setup-ran"}) {
		t.Errorf("workspace holds %v, want only what setup made", names)
	}
	want := []string{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceCloning, sandboxwire.TypeWorkspaceWarning,
		sandboxwire.TypeWorkspaceSetup, sandboxwire.TypeWorkspaceReady}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

// TestHostileCloneURLsAreRefused: even if a spec held them, file:, ext::,
// plain http to a host nobody listed and credentials never reach git, and
// the credentials appear in no event or warning.
func TestHostileCloneURLsAreRefused(t *testing.T) {
	src := t.TempDir()
	if out, err := exec.Command("git", "init", "--quiet", src).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	for _, url := range []string{
		"file://" + src,
		src,
		"ext::sh -c touch% /tmp/pwned-by-ext",
		"http://example.com/repo.git",
		"https://user:hunter2@127.0.0.1:1/repo.git",
		"git://-oProxyCommand=x/repo",
	} {
		dir := t.TempDir()
		st, rec := run(t, dir, &sandboxwire.WorkspaceSpec{RepositoryURL: url, SetupTimeoutSeconds: 30})
		if st.Status != sandboxwire.WorkspaceDegraded || !strings.Contains(st.Warnings[0], "was not cloned") {
			t.Errorf("%s: status = %+v, want refused", url, st)
		}
		if strings.Contains(rec.raw(), "hunter2") || strings.Contains(strings.Join(st.Warnings, " "), "hunter2") {
			t.Errorf("%s: credentials in the events: %s", url, rec.raw())
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s: workspace holds %v", url, entries)
		}
	}
	if _, err := os.Stat("/tmp/pwned-by-ext"); err == nil {
		t.Error("ext:: ran a command")
	}
}
