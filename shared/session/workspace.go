package session

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// DefaultSetupTimeoutSeconds bounds each setup command of a workspace whose
// configuration names no timeout (the spec's five minutes).
const DefaultSetupTimeoutSeconds = 300

// checkTaskContext validates create's task_context: a clone URL
// (sandboxwire.CheckCloneURL, with the operator's insecure hosts), branch
// names git takes as names, never options, a pull request number that is
// one. No part of a bad value is repeated back.
func checkTaskContext(t *sandboxwire.TaskContext, insecureHosts []string) error {
	if t == nil {
		return nil
	}
	invalid := func(format string, args ...any) error {
		return apierror.New(apierror.InvalidRequest, format, args...)
	}
	if t.RepositoryURL != "" {
		if err := sandboxwire.CheckCloneURL(t.RepositoryURL, insecureHosts); err != nil {
			return invalid("task_context.repository_url %s.", err)
		}
	}
	for _, b := range []struct{ name, v string }{{"branch", t.Branch}, {"base_branch", t.BaseBranch}} {
		if b.v != "" && !sandboxwire.ValidBranch(b.v) {
			return invalid("task_context.%s must be a branch name of at most %d bytes (letters, digits, '.', '_', '-', '/'; not starting with '-', no '..').",
				b.name, sandboxwire.MaxBranchNameBytes)
		}
	}
	if t.PullRequestNumber < 0 || t.PullRequestNumber > sandboxwire.MaxPullRequest {
		return invalid("task_context.pull_request_number must be a pull request number from 1 to %d.", sandboxwire.MaxPullRequest)
	}
	return nil
}

// WorkspaceFor is the workspace a session's sandbox provisions: nil when its
// type has none; else the repository and branch its repo_source and task
// context bind (the spec's rules: fixed clones the type's repository
// whatever the task names; task_context clones the task's repository, none
// without one; the task's branch wins over the type's default branch, for
// fixed only when the task names the same repository or none), cloned
// unless checkout_on_start says false; then the setup commands.
func WorkspaceFor(w *registry.WorkspaceConfig, task *sandboxwire.TaskContext, insecureHosts []string) *sandboxwire.WorkspaceSpec {
	if w == nil || !w.Enabled {
		return nil
	}
	ws := &sandboxwire.WorkspaceSpec{
		SetupCommands:       slices.Clone(w.SetupCommands),
		SetupTimeoutSeconds: cmp.Or(w.SetupTimeoutSeconds, DefaultSetupTimeoutSeconds),
		Task:                task,
		InsecureHosts:       insecureHosts,
	}
	var taskRepo, taskBranch string
	if task != nil {
		taskRepo, taskBranch = task.RepositoryURL, task.Branch
	}
	switch w.RepoSource.Type {
	case registry.RepoFixed:
		ws.RepositoryURL, ws.Branch = w.RepoSource.URL, w.RepoSource.Branch
		if taskBranch != "" && (taskRepo == "" || sameRepo(taskRepo, w.RepoSource.URL)) {
			ws.Branch = taskBranch
		}
	case registry.RepoTaskContext:
		if taskRepo != "" {
			ws.RepositoryURL, ws.Branch = taskRepo, cmp.Or(taskBranch, w.RepoSource.Branch)
		}
	}
	ws.NoCheckout = ws.RepositoryURL != "" && !w.Checkout()
	return ws
}

// sameRepo reports whether two repository URLs name the same repository
// (case, a trailing ".git" or "/" aside).
func sameRepo(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(s), "/"), ".git")
		return s
	}
	return norm(a) == norm(b)
}

// workspaceStatus is what create answers of a ready session's workspace:
// none without one; degraded, saying why, for a sandbox launched without
// it; else what ready reported (ready if it reported nothing).
func workspaceStatus(s Session) sandboxwire.WorkspaceStatus {
	switch {
	case s.Workspace == nil || !s.Workspace.Enabled:
		return sandboxwire.WorkspaceStatus{Status: sandboxwire.WorkspaceNone, Warnings: []string{}}
	case s.WorkspaceDropped != "":
		return sandboxwire.WorkspaceStatus{Status: sandboxwire.WorkspaceDegraded, Warnings: []string{s.WorkspaceDropped}}
	case s.WorkspaceStatus != nil:
		st := *s.WorkspaceStatus
		if st.Warnings == nil {
			st.Warnings = []string{}
		}
		return st
	}
	return sandboxwire.WorkspaceStatus{Status: sandboxwire.WorkspaceReady, Warnings: []string{}}
}

// CheckWorkspaceStatus bounds what a sandbox reports of its workspace: a
// known status, a few short warnings of UTF-8.
func CheckWorkspaceStatus(st *sandboxwire.WorkspaceStatus) error {
	if st == nil {
		return nil
	}
	if st.Status != sandboxwire.WorkspaceReady && st.Status != sandboxwire.WorkspaceDegraded && st.Status != sandboxwire.WorkspaceNone {
		return apierror.New(apierror.InvalidRequest, "workspace.status must be ready, degraded or none.")
	}
	if len(st.Warnings) > sandboxwire.MaxWorkspaceWarnings {
		return apierror.New(apierror.InvalidRequest, "workspace.warnings holds at most %d warnings.", sandboxwire.MaxWorkspaceWarnings)
	}
	for _, w := range st.Warnings {
		if len(w) > sandboxwire.MaxWorkspaceWarningBytes || !utf8.ValidString(w) {
			return apierror.New(apierror.InvalidRequest, "workspace.warnings are at most %d bytes of UTF-8 each.", sandboxwire.MaxWorkspaceWarningBytes)
		}
	}
	return nil
}
