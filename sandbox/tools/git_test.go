package tools_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/tools"
)

// gitRepo is a workspace holding a real repository with one commit, and the
// registry of its tools.
func gitRepo(t *testing.T) (*tools.Registry, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed")
	}
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "outside.txt"), []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, ws, "README.md", "# Demo\n")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"config", "user.name", "Test"},
		{"config", "user.email", "test@example.com"},
		{"add", "README.md"},
		{"commit", "-q", "-m", "first"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	p, err := policy.Parse("", ws)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tools.New(p, tools.Options{MemoryPath: filepath.Join(root, "memory.json"),
		Env: func() []string { return append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_DIR="+root) }})
	if err != nil {
		t.Fatal(err)
	}
	return r, ws
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGitWorksOnARepository: the git tool's subcommands work on a real
// repository: a change is seen, staged, committed, logged, branched.
func TestGitWorksOnARepository(t *testing.T) {
	t.Parallel()
	r, ws := gitRepo(t)
	write(t, ws, "README.md", "# Demo\nmore\n")
	write(t, ws, "new.txt", "new\n")
	ok(t, call(t, r, "git", `{"subcommand":"status","args":["--short"]}`), " M README.md", "?? new.txt")
	ok(t, call(t, r, "git", `{"subcommand":"diff"}`), "+more")
	ok(t, call(t, r, "git", `{"subcommand":"add","args":["README.md","new.txt"]}`))
	ok(t, call(t, r, "git", `{"subcommand":"diff","args":["--cached","--stat"]}`), "2 files changed")
	ok(t, call(t, r, "git", `{"subcommand":"commit","args":["-m","second change"]}`))
	ok(t, call(t, r, "git", `{"subcommand":"log","args":["--oneline","-n","5"]}`), "second change", "first")
	ok(t, call(t, r, "git", `{"subcommand":"show","args":["--stat","HEAD"]}`), "new.txt")
	ok(t, call(t, r, "git", `{"subcommand":"switch","args":["-c","feature/x"]}`))
	ok(t, call(t, r, "git", `{"subcommand":"branch","args":["--show-current"]}`), "feature/x")
	ok(t, call(t, r, "git", `{"subcommand":"checkout","args":["main"]}`))
	ok(t, call(t, r, "git", `{"subcommand":"rev-parse","args":["--abbrev-ref","HEAD"]}`), "main")
	write(t, ws, "README.md", "broken\n")
	ok(t, call(t, r, "git", `{"subcommand":"restore","args":["README.md"]}`))
	if b, _ := os.ReadFile(filepath.Join(ws, "README.md")); string(b) != "# Demo\nmore\n" {
		t.Errorf("restore left %q", b)
	}
	// A commit needs its message: no editor is ever started.
	write(t, ws, "new.txt", "changed\n")
	fails(t, call(t, r, "git", `{"subcommand":"commit","args":["-a"]}`), "exit code")
}

// TestGitRefusesWhatRunsPrograms: no option, subcommand or configuration
// that would have git run another program passes; paths stay in the
// workspace; arguments never reach a shell.
func TestGitRefusesWhatRunsPrograms(t *testing.T) {
	t.Parallel()
	r, ws := gitRepo(t)
	marker := filepath.Join(t.TempDir(), "ran")
	for _, args := range []string{
		`{"subcommand":"status","args":["-c","core.fsmonitor=touch ` + marker + `"]}`,
		`{"subcommand":"log","args":["--config","core.pager=touch ` + marker + `"]}`,
		`{"subcommand":"diff","args":["--ext-diff"]}`,
		`{"subcommand":"diff","args":["--textconv"]}`,
		`{"subcommand":"log","args":["--output=` + marker + `"]}`,
		`{"subcommand":"status","args":["-u"]}`,
		`{"subcommand":"branch","args":["-u","origin/main"]}`,
		`{"subcommand":"commit","args":["--exec","touch ` + marker + `"]}`,
		`{"subcommand":"checkout","args":["--upload-pack=touch ` + marker + `"]}`,
		`{"subcommand":"diff","args":["--no-index","/etc/passwd","README.md"]}`,
	} {
		fails(t, call(t, r, "git", args), "is not allowed")
	}
	// Only the listed subcommands; an alias is not one.
	fails(t, call(t, r, "git", `{"subcommand":"fetch"}`), "subcommand")
	fails(t, call(t, r, "git", `{"subcommand":"config","args":["core.sshCommand","x"]}`), "subcommand")
	// Paths stay in the workspace.
	fails(t, call(t, r, "git", `{"subcommand":"add","args":["../outside.txt"]}`), "denied by policy")
	fails(t, call(t, r, "git", `{"subcommand":"diff","args":["--","../outside.txt"]}`), "denied by policy")
	fails(t, call(t, r, "git", `{"subcommand":"checkout","args":["--","README.md"]}`), "takes no paths")
	// Two paths, one outside the repository, are a diff of the files: the
	// policy checks a revision that reads like a path.
	fails(t, call(t, r, "git", `{"subcommand":"diff","args":["/etc/passwd","README.md"]}`), "denied by policy")
	fails(t, call(t, r, "git", `{"subcommand":"diff","args":["../outside.txt","README.md"]}`), "denied by policy")
	if err := os.Symlink(filepath.Join(filepath.Dir(ws), "outside.txt"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	fails(t, call(t, r, "git", `{"subcommand":"show","args":["link"]}`), "denied by policy")
	ok(t, call(t, r, "git", `{"subcommand":"diff","args":["HEAD","--","README.md"]}`))
	// Arguments are git's, never a shell's.
	fails(t, call(t, r, "git", `{"subcommand":"log","args":["$(touch `+marker+`)"]}`), "exit code")
	// A repository whose configuration runs programs is refused as a whole.
	cmd := exec.Command("git", "config", "core.fsmonitor", "touch "+marker)
	cmd.Dir = ws
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	fails(t, call(t, r, "git", `{"subcommand":"status"}`), "core.fsmonitor")
	// Hooks never run.
	cmd = exec.Command("git", "config", "--unset", "core.fsmonitor")
	cmd.Dir = ws
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	hook := filepath.Join(ws, ".git", "hooks", "pre-commit")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ok(t, call(t, r, "git", `{"subcommand":"commit","args":["--allow-empty","-m","hooked"]}`))
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("a program ran: %v", err)
	}
}

// TestGitEnvironment: git runs without the agent's GIT_* variables (GIT_DIR
// would point it elsewhere), without system configuration, pager or prompt.
func TestGitEnvironment(t *testing.T) {
	t.Parallel()
	r, _ := gitRepo(t)
	res := call(t, r, "git", `{"subcommand":"rev-parse","args":["--show-toplevel"]}`)
	ok(t, res, "/ws\n")
	if strings.Contains(res.Content, "fatal") {
		t.Errorf("git saw the agent's GIT_DIR: %s", res.Content)
	}
}
