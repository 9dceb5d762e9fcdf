package session_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// The spec's task context binding rules.
func TestWorkspaceForBindsTheTaskContext(t *testing.T) {
	t.Parallel()
	const typeRepo, taskRepo = "https://github.com/org/infra-repo", "https://github.com/org/app"
	pr := &sandboxwire.TaskContext{RepositoryURL: taskRepo, Branch: "feature/auth", PullRequestNumber: 42, BaseBranch: "main"}
	cfg := func(typ, url, branch string) *registry.WorkspaceConfig {
		return &registry.WorkspaceConfig{Enabled: true, RepoSource: registry.RepoSource{Type: typ, URL: url, Branch: branch},
			SetupCommands: []string{"make"}, SetupTimeoutSeconds: 60}
	}
	for _, c := range []struct {
		name       string
		cfg        *registry.WorkspaceConfig
		task       *sandboxwire.TaskContext
		url, brnch string
	}{
		{"PR-based task context", cfg(registry.RepoTaskContext, "", ""), pr, taskRepo, "feature/auth"},
		{"the task's branch wins", cfg(registry.RepoTaskContext, "", "main"), &sandboxwire.TaskContext{RepositoryURL: taskRepo, Branch: "develop"}, taskRepo, "develop"},
		{"the type's branch is the fallback", cfg(registry.RepoTaskContext, "", "main"), &sandboxwire.TaskContext{RepositoryURL: taskRepo}, taskRepo, "main"},
		{"no repository in the task: empty", cfg(registry.RepoTaskContext, "", "main"), &sandboxwire.TaskContext{Branch: "develop"}, "", ""},
		{"no task: empty", cfg(registry.RepoTaskContext, "", "main"), nil, "", ""},
		{"fixed ignores the task's repository", cfg(registry.RepoFixed, typeRepo, "main"), pr, typeRepo, "main"},
		{"fixed takes the branch of a task on its repository", cfg(registry.RepoFixed, typeRepo, "main"), &sandboxwire.TaskContext{RepositoryURL: typeRepo + ".git", Branch: "develop"}, typeRepo, "develop"},
		{"fixed takes the branch of a task without repository", cfg(registry.RepoFixed, typeRepo, ""), &sandboxwire.TaskContext{Branch: "develop"}, typeRepo, "develop"},
		{"none clones nothing", cfg(registry.RepoNone, "", ""), pr, "", ""},
	} {
		ws := session.WorkspaceFor(c.cfg, c.task, nil)
		if ws == nil || ws.RepositoryURL != c.url || ws.Branch != c.brnch || ws.Task != c.task || len(ws.SetupCommands) != 1 || ws.SetupTimeoutSeconds != 60 {
			t.Errorf("%s: %+v, want %q at %q", c.name, ws, c.url, c.brnch)
		}
	}
	if ws := session.WorkspaceFor(&registry.WorkspaceConfig{Enabled: false}, pr, nil); ws != nil {
		t.Errorf("disabled workspace: %+v", ws)
	}
	if ws := session.WorkspaceFor(nil, pr, nil); ws != nil {
		t.Errorf("no agent type: %+v", ws)
	}
	if ws := session.WorkspaceFor(&registry.WorkspaceConfig{Enabled: true}, nil, nil); ws.SetupTimeoutSeconds != session.DefaultSetupTimeoutSeconds {
		t.Errorf("default timeout: %+v", ws)
	}
	// checkout_on_start: cloned when true or left out; false leaves the
	// repository unchecked-out; without a repository there is nothing to leave.
	for _, c := range []struct {
		checkout *bool
		task     *sandboxwire.TaskContext
		want     bool
	}{{nil, pr, false}, {new(true), pr, false}, {new(false), pr, true}, {new(false), nil, false}} {
		w := cfg(registry.RepoTaskContext, "", "main")
		w.CheckoutOnStart = c.checkout
		if ws := session.WorkspaceFor(w, c.task, nil); ws.NoCheckout != c.want {
			t.Errorf("checkout_on_start %v, task %v: no_checkout %v, want %v", c.checkout, c.task != nil, ws.NoCheckout, c.want)
		}
	}
}
