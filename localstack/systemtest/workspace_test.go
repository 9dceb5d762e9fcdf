package systemtest_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/remote-agents/remote-agents/sandbox/provision/gitserve"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// workspaceOf is the local workspace of session id's first sandbox.
func (s *stack) workspaceOf(id string) string {
	return filepath.Join(s.work, "sandboxes", id+"-1")
}

// workspaceEvents waits for session id's workspace.ready event and returns
// the types of the events up to it, and those events.
func (s *stack) workspaceEvents(t *testing.T, id string) ([]string, []session.Event) {
	t.Helper()
	var evs []session.Event
	eventually(t, 30*time.Second, "workspace.ready", func() bool {
		var err error
		evs, err = s.srv.Env.SessionStore().Events(t.Context(), id, 0, 100)
		return err == nil && slices.ContainsFunc(evs, func(e session.Event) bool { return e.Type == sandboxwire.TypeWorkspaceReady })
	})
	var types []string
	for _, e := range evs {
		if strings.HasPrefix(e.Type, "workspace.") {
			types = append(types, e.Type)
		}
	}
	return types, evs
}

func (s *stack) putType(t testing.TB, id string, ws map[string]any) {
	t.Helper()
	if r := s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": id, "name": id, "workspace_config": ws}); r.status != http.StatusCreated {
		t.Fatalf("create type %s: %d %s", id, r.status, r.raw)
	}
}

func serveRepo(t *testing.T) gitserve.Repo {
	return gitserve.Serve(t, "app", []string{"main", "develop"}, map[string]map[string]string{
		"main":    {"README.md": "main\n"},
		"develop": {"README.md": "develop\n", "src/dev.txt": "dev\n"},
	})
}

// A type with repo_source task_context: create's task_context names a
// repository served over HTTP on loopback and a branch that wins over the
// type's default; the real sandbox clones it (shallow), writes the task
// context, runs the setup command in the workspace, each phase an event in
// order, before ready; create answers workspace ready.
func TestWorkspaceClonesTheTaskRepositoryBeforeReady(t *testing.T) {
	t.Parallel()
	s := start(t, withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 25 * time.Second }))
	repo := serveRepo(t)
	s.putType(t, "coder", map[string]any{"enabled": true, "tools": []string{"read"},
		"repo_source": map[string]any{"type": "task_context", "branch": "main"}, "setup_commands": []string{"cat src/dev.txt > setup.out"}})
	body := createBody("Hello")
	body["agent_type"] = "coder"
	task := map[string]any{"repository_url": repo.URL, "branch": "develop", "pull_request_number": 42, "base_branch": "main"}
	body["task_context"] = task
	r := s.create(body)
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	if want := map[string]any{"status": "ready", "warnings": []any{}}; !reflect.DeepEqual(r.body["workspace"], want) {
		t.Errorf("create's workspace = %v, want %v", r.body["workspace"], want)
	}
	id := r.str("agent_id")
	types, evs := s.workspaceEvents(t, id)
	want := []string{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceCloning, sandboxwire.TypeWorkspaceSetup, sandboxwire.TypeWorkspaceReady}
	if !slices.Equal(types, want) {
		t.Errorf("workspace events = %v, want %v", types, want)
	}
	// Provisioning is over before the agent's first word.
	first := slices.IndexFunc(evs, func(e session.Event) bool { return e.Type == sandboxwire.TypeAgentMessage })
	ready := slices.IndexFunc(evs, func(e session.Event) bool { return e.Type == sandboxwire.TypeWorkspaceReady })
	if first >= 0 && first < ready {
		t.Errorf("the agent spoke before its workspace was ready: %v", evs)
	}
	for _, e := range evs {
		if e.Type == sandboxwire.TypeWorkspaceCloning && (e.Data["repository_url"] != repo.URL || e.Data["branch"] != "develop") {
			t.Errorf("cloning event = %v", e.Data)
		}
	}
	ws := s.workspaceOf(id)
	for file, content := range map[string]string{"README.md": "develop\n", "setup.out": "dev\n"} {
		if got, err := os.ReadFile(filepath.Join(ws, file)); err != nil || string(got) != content {
			t.Errorf("%s = %q (%v), want %q", file, got, err, content)
		}
	}
	raw, err := os.ReadFile(filepath.Join(ws, sandboxwire.TaskFile))
	var got map[string]any
	if err != nil || json.Unmarshal(raw, &got) != nil || got["pull_request_number"] != float64(42) || got["base_branch"] != "main" {
		t.Errorf("task file: %s %v", raw, err)
	}
	sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil || sess.TaskContext == nil || sess.TaskContext.Branch != "develop" || sess.WorkspaceStatus == nil || sess.WorkspaceStatus.Status != "ready" {
		t.Errorf("stored session: %+v %v", sess, err)
	}
	// The agent is told of its task (its conversation file holds the prompt).
	conv, _ := os.ReadFile(filepath.Join(ws, "conversation.json"))
	if !strings.Contains(string(conv), "pull request #42") || !strings.Contains(string(conv), sandboxwire.TaskFile) {
		t.Errorf("the prompt context lacks the task: %s", conv)
	}

	// A task context without a repository: an empty workspace, no clone; the
	// setup command, which reads a file of the repository, fails there: the
	// workspace is ready all the same, set up in part, with the warning and
	// an exception report.
	body["task_context"] = map[string]any{"branch": "develop"}
	body["initial_prompt"] = "Nothing to clone"
	r = s.create(body)
	if r.status != http.StatusOK {
		t.Fatalf("create without repository: %d %s", r.status, r.raw)
	}
	wsBody, _ := r.body["workspace"].(map[string]any)
	warnings, _ := wsBody["warnings"].([]any)
	if wsBody["status"] != "ready" || len(warnings) != 1 || !strings.Contains(warnings[0].(string), "setup command 1 of 1 (cat src/dev.txt > setup.out) failed with exit code 1") {
		t.Errorf("create's workspace = %v", r.body["workspace"])
	}
	id = r.str("agent_id")
	types, _ = s.workspaceEvents(t, id)
	want = []string{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceSetup, sandboxwire.TypeWorkspaceWarning, sandboxwire.TypeWorkspaceReady}
	if !slices.Equal(types, want) {
		t.Errorf("workspace events = %v, want %v", types, want)
	}
	if _, err := os.Stat(filepath.Join(s.workspaceOf(id), "README.md")); !os.IsNotExist(err) {
		t.Errorf("a workspace without a repository holds one: %v", err)
	}
	// The report is logged as the warning event is taken, which may be
	// after create answered.
	eventually(t, 30*time.Second, "the exception report of the workspace set up in part", func() bool {
		logs := s.logs.String()
		return strings.Contains(logs, "workspace_provisioning") && strings.Contains(logs, id)
	})
}

// A setup command that outlives setup_timeout_seconds is killed; the agent
// is ready with a warning. Create, meanwhile, times out with the agent's id
// (408, retryable), and a retry with the same Idempotency-Key waits on the
// same agent until it is ready.
func TestSlowSetupOutlivesCreateAndTimesOut(t *testing.T) {
	t.Parallel()
	s := start(t, withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 1 * time.Second }))
	// The first command waits until the test lets it go, the second until
	// its timeout kills it.
	s.putType(t, "slow", map[string]any{"enabled": true, "tools": []string{"read"}, "setup_timeout_seconds": 1,
		"setup_commands": []string{"while [ ! -f go ]; do sleep 0.05; done", "sleep 600", "touch never"}})
	s.putType(t, "gated", map[string]any{"enabled": true, "tools": []string{"read"}, "setup_timeout_seconds": 60,
		"setup_commands": []string{"while [ ! -f go ]; do sleep 0.05; done"}})
	body := createBody("Hello")
	body["agent_type"] = "gated"
	first := s.create(body, "Idempotency-Key", "slow-setup")
	wantError(t, first, http.StatusRequestTimeout, "agent_creation_timeout")
	details, _ := first.body["details"].(map[string]any)
	id, _ := details["agent_id"].(string)
	if id == "" || first.body["retryable"] != true {
		t.Fatalf("408 without the agent id or not retryable: %s", first.raw)
	}
	if a := s.srv.Env.SessionStore(); a != nil {
		sess, err := a.Get(t.Context(), id)
		if err != nil || sess.State != session.Provisioning {
			t.Fatalf("while its setup runs the agent is %s (%v), want provisioning", sess.State, err)
		}
	}
	again := s.create(body, "Idempotency-Key", "slow-setup")
	wantError(t, again, http.StatusRequestTimeout, "agent_creation_timeout")
	if d, _ := again.body["details"].(map[string]any); d["agent_id"] != id {
		t.Errorf("the retry waited on another agent: %s", again.raw)
	}
	if err := os.WriteFile(filepath.Join(s.workspaceOf(id), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.workspaceEvents(t, id)
	done := s.create(body, "Idempotency-Key", "slow-setup")
	if done.status != http.StatusOK || done.str("agent_id") != id {
		t.Fatalf("retry after the setup: %d %s", done.status, done.raw)
	}
	if n := len(s.srv.Launcher.Running()); n != 1 {
		t.Errorf("%d sandboxes for one idempotent create", n)
	}

	// A create without an Idempotency-Key is no dead end: its 408 names the
	// key the platform assigned, and the create sent again with it hands
	// the agent out once it is ready.
	keyless := s.create(body)
	wantError(t, keyless, http.StatusRequestTimeout, "agent_creation_timeout")
	kd, _ := keyless.body["details"].(map[string]any)
	kid, _ := kd["agent_id"].(string)
	key, _ := kd["idempotency_key"].(string)
	if kid == "" || kid == id || key == "" {
		t.Fatalf("408 of a create without a key: %s", keyless.raw)
	}
	if err := os.WriteFile(filepath.Join(s.workspaceOf(kid), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.workspaceEvents(t, kid)
	taken := s.create(body, "Idempotency-Key", key)
	if taken.status != http.StatusOK || taken.str("agent_id") != kid || taken.str("session_token") == "" {
		t.Fatalf("the create sent again with the assigned key: %d %s", taken.status, taken.raw)
	}
	if r := s.shutdown(kid, taken.str("session_token")); r.status != http.StatusOK {
		t.Fatalf("shutdown: %d %s", r.status, r.raw)
	}

	// The timed-out command.
	body = createBody("Slow")
	body["agent_type"] = "slow"
	go func() { _ = s.create(body, "Idempotency-Key", "slow-2") }()
	sid := s.firstSandboxExcept(t, map[string]bool{id: true, kid: true})
	eventually(t, 30*time.Second, "workspace", func() bool {
		_, err := os.Stat(s.workspaceOf(sid))
		return err == nil
	})
	if err := os.WriteFile(filepath.Join(s.workspaceOf(sid), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	types, evs := s.workspaceEvents(t, sid)
	want := []string{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceSetup, sandboxwire.TypeWorkspaceSetup,
		sandboxwire.TypeWorkspaceWarning, sandboxwire.TypeWorkspaceReady}
	if !slices.Equal(types, want) {
		t.Errorf("workspace events = %v, want %v", types, want)
	}
	last := evs[slices.IndexFunc(evs, func(e session.Event) bool { return e.Type == sandboxwire.TypeWorkspaceReady })]
	if last.Data["status"] != "ready" || !strings.Contains(last.Data["warnings"].([]any)[0].(string), "(sleep 600) timed out after 1s") {
		t.Errorf("ready event = %v", last.Data)
	}
	r := s.create(body, "Idempotency-Key", "slow-2")
	if r.status != http.StatusOK || r.body["workspace"].(map[string]any)["status"] != "ready" || len(r.body["workspace"].(map[string]any)["warnings"].([]any)) != 1 {
		t.Errorf("create after the timeout: %d %s", r.status, r.raw)
	}
	if _, err := os.Stat(filepath.Join(s.workspaceOf(sid), "never")); !os.IsNotExist(err) {
		t.Errorf("the command after the timed-out one ran: %v", err)
	}
}

// Hostile task contexts are 400 invalid_request, before any agent exists,
// and never repeat the credentials they carry.
func TestHostileTaskContextIsRefused(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox())
	for name, task := range map[string]any{
		"a file: URL":                map[string]any{"repository_url": "file:///etc"},
		"a bare path":                map[string]any{"repository_url": "/etc"},
		"an ext:: URL":               map[string]any{"repository_url": "ext::sh -c id"},
		"credentials in the URL":     map[string]any{"repository_url": "https://bob:hunter2@github.com/org/repo"},
		"http to an unlisted host":   map[string]any{"repository_url": "http://example.com/org/repo"},
		"git to an unlisted host":    map[string]any{"repository_url": "git://example.com/org/repo"},
		"ssh":                        map[string]any{"repository_url": "ssh://git@github.com/org/repo"},
		"a branch that is an option": map[string]any{"repository_url": "https://github.com/org/repo", "branch": "--upload-pack=id"},
		"a base branch with ..":      map[string]any{"base_branch": "a/../b"},
		"an oversized URL":           map[string]any{"repository_url": "https://github.com/" + strings.Repeat("x", 3000)},
		"an oversized branch":        map[string]any{"branch": strings.Repeat("b", 300)},
		"a negative pull request":    map[string]any{"pull_request_number": -1},
		"an unknown field":           map[string]any{"token": "ghp_x"},
		"a wrong type":               "https://github.com/org/repo",
	} {
		body := createBody("Hello")
		body["task_context"] = task
		r := s.create(body)
		if r.status != 400 || r.str("error_code") != "invalid_request" || strings.Contains(r.raw, "hunter2") {
			t.Errorf("%s: %d %s", name, r.status, r.raw)
		}
	}
	if n := len(s.srv.Launcher.Running()); n != 0 {
		t.Errorf("%d sandboxes for refused creates", n)
	}
}

// A sandbox that cannot be launched is launched once more (locally, a
// second process); when that fails too, create fails with a clear error,
// at once rather than at its timeout, and the agent is failed.
func TestLaunchFailingTwiceFailsCreate(t *testing.T) {
	t.Parallel()
	s := start(t, withSandbox(filepath.Join(t.TempDir(), "no-such-agent"), "sandbox"), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 25 * time.Second }))
	r := s.create(createBody("Hello"), "Idempotency-Key", "never-launches")
	wantError(t, r, http.StatusServiceUnavailable, "service_unavailable")
	if !strings.Contains(r.str("message"), "could not be launched, neither on its capacity nor on the fallback capacity") || r.body["retryable"] != true {
		t.Errorf("create: %s", r.raw)
	}
	if logs := s.logs.String(); strings.Count(logs, "launch failed") < 2 {
		t.Errorf("not launched twice:\n%s", logs)
	}
}

// The embed view shows the workspace's provisioning as one compact line,
// and each warning.
func TestEmbedViewShowsTheWorkspace(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	s.putType(t, "broken", map[string]any{"enabled": true, "tools": []string{"read"}, "setup_commands": []string{"exit 7"}})
	body := createBody("Hi")
	body["agent_type"] = "broken"
	created := s.create(body)
	if created.status != http.StatusOK {
		t.Fatalf("create: %d %s", created.status, created.raw)
	}
	tab := browser(t)
	inBrowser(t, tab, 30*time.Second,
		chromedp.Navigate(created.str("embed_url")),
		voidPoll(`(document.querySelector('[data-role="workspace"]') || {}).textContent === "Workspace ready, set up in part (1 warning(s))"`, 25*time.Second),
	)
	warning := value(t, tab, chromedp.Text(chromedp.CSS(`[data-role="workspace-warning"]`)))
	if !strings.Contains(warning, "setup command 1 of 1 (exit 7) failed with exit code 7") {
		t.Errorf("warning line %q", warning)
	}
	if n := value(t, tab, chromedp.Evaluate[int](`document.querySelectorAll('[data-role="workspace"]').length`)); n != 1 {
		t.Errorf("%d workspace lines, want one updated in place", n)
	}
}

// A type with a fixed repository (served over plain http on loopback, which
// git_insecure_hosts allows by default) clones it, at its branch, whatever
// repository the task names; alive tells the workspace too.
func TestFixedRepositoryIgnoresTheTaskRepository(t *testing.T) {
	t.Parallel()
	s := start(t, withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 25 * time.Second }))
	app := serveRepo(t)
	infra := gitserve.Serve(t, "infra", []string{"main", "stable"}, map[string]map[string]string{
		"main": {"README.md": "infra main\n"}, "stable": {"README.md": "infra stable\n"},
	})
	s.putType(t, "ops", map[string]any{"enabled": true, "tools": []string{"read"},
		"repo_source": map[string]any{"type": "fixed", "url": infra.URL, "branch": "stable"}})
	body := createBody("Hello")
	body["agent_type"] = "ops"
	body["task_context"] = map[string]any{"repository_url": app.URL, "branch": "develop"}
	r := s.create(body)
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := r.str("agent_id")
	if got, err := os.ReadFile(filepath.Join(s.workspaceOf(id), "README.md")); err != nil || string(got) != "infra stable\n" {
		t.Errorf("README.md = %q (%v), want the fixed repository's branch", got, err)
	}
	if ws, _ := s.alive(id, r.str("session_token")).body["workspace"].(map[string]any); ws["status"] != "ready" {
		t.Errorf("alive's workspace = %v", ws)
	}
	// Plain http to a host nobody listed is refused at the PUT.
	bad := s.call(http.MethodPut, agentTypes+"/ops/workspace-config", appKey, map[string]any{"enabled": true,
		"repo_source": map[string]any{"type": "fixed", "url": "http://example.com/infra.git"}})
	wantError(t, bad, 400, "invalid_request")
}
