package provision_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/provision"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// TestPreparedWorkspaceIsNotProvisionedTwice: a warm sandbox clones and sets
// up its fixed repository before any session (no event goes out then); the
// session that claims it, of the same workspace, gets the clone and setup
// events replayed and its task context written, and the setup command has
// run once. A session of another branch gets the workspace emptied and
// provisioned from scratch.
func TestPreparedWorkspaceIsNotProvisionedTwice(t *testing.T) {
	repo := serve(t)
	ws := sandboxwire.WorkspaceSpec{RepositoryURL: repo.URL, Branch: "main", InsecureHosts: sandboxwire.DefaultInsecureGitHosts,
		SetupCommands: []string{"echo ran >> runs.txt", "false", "echo skipped >> runs.txt"}, SetupTimeoutSeconds: 30}

	dir := t.TempDir()
	early := &recorder{}
	prepared := provision.Prepare(t.Context(), ws, provision.Options{Dir: dir, Emit: early.emit, Secrets: redact.New()})
	if len(early.types()) != 0 {
		t.Fatalf("events before any session: %v", early.types())
	}
	if got := read(t, filepath.Join(dir, "runs.txt")); got != "ran\n" {
		t.Fatalf("runs.txt after prepare = %q", got)
	}
	claimed := ws
	claimed.Task = &sandboxwire.TaskContext{PullRequestNumber: 7}
	rec := &recorder{}
	st := provision.Run(t.Context(), &claimed, provision.Options{Dir: dir, Emit: rec.emit, Secrets: redact.New(), Prepared: prepared})
	if st.Status != sandboxwire.WorkspaceReady || len(st.Warnings) != 1 {
		t.Errorf("status = %+v, want ready with the prepared setup's failure", st)
	}
	want := []string{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceCloning, sandboxwire.TypeWorkspaceSetup,
		sandboxwire.TypeWorkspaceSetup, sandboxwire.TypeWorkspaceWarning, sandboxwire.TypeWorkspaceReady}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	if got := read(t, filepath.Join(dir, "runs.txt")); got != "ran\n" {
		t.Errorf("runs.txt = %q: the setup ran again", got)
	}
	if _, err := os.Stat(filepath.Join(dir, sandboxwire.TaskFile)); err != nil {
		t.Errorf("no task file: %v", err)
	}

	other := t.TempDir()
	prepared = provision.Prepare(t.Context(), ws, provision.Options{Dir: other, Secrets: redact.New()})
	develop := ws
	develop.Branch, develop.SetupCommands = "develop", []string{"echo again >> runs.txt"}
	rec2 := &recorder{}
	st = provision.Run(t.Context(), &develop, provision.Options{Dir: other, Emit: rec2.emit, Secrets: redact.New(), Prepared: prepared})
	if st.Status != sandboxwire.WorkspaceReady {
		t.Errorf("status = %+v, want ready", st)
	}
	if got := read(t, filepath.Join(other, "runs.txt")); got != "again\n" {
		t.Errorf("runs.txt = %q: the prepared workspace was not emptied", got)
	}
	if got := read(t, filepath.Join(other, "src/dev.txt")); got != "dev\n" {
		t.Errorf("the develop branch was not cloned: %q", got)
	}
}
