// Package gitserve serves a real git repository over HTTP on loopback, for
// tests, read-only: with git http-backend behind net/http/cgi (the smart
// protocol, Serve) or as plain files (the "dumb" protocol, ServeDumb).
package gitserve

import (
	"net/http"
	"net/http/cgi" //nolint:gosec // httpoxy concerns Go before 1.6.3; this serves tests on loopback
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Repo is a served repository: its clone URL and the branches it has.
type Repo struct {
	URL string
}

// Serve makes a bare repository named name with one commit per branch (the
// first branch is the default one; each commit adds the files of its
// branch, path to content) and serves it with git http-backend until the
// test ends.
func Serve(t testing.TB, name string, branches []string, files map[string]map[string]string) Repo {
	t.Helper()
	root := bare(t, name, branches, files)
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	h := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1"},
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return Repo{URL: srv.URL + "/" + name + ".git"}
}

// ServeDumb makes the repository Serve makes and serves it as static files,
// as a plain web server does: git's "dumb" HTTP protocol, which cannot
// serve a shallow clone.
func ServeDumb(t testing.TB, name string, branches []string, files map[string]map[string]string) Repo {
	t.Helper()
	root := bare(t, name, branches, files)
	srv := httptest.NewServer(http.FileServer(http.Dir(root)))
	t.Cleanup(srv.Close)
	return Repo{URL: srv.URL + "/" + name + ".git"}
}

// bare makes the bare repository name.git in a directory of its own, which
// it returns, with the files git's dumb protocol reads (update-server-info).
func bare(t testing.TB, name string, branches []string, files map[string]map[string]string) string {
	t.Helper()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	bare := filepath.Join(root, name+".git")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	git(work, "init", "--quiet", "--initial-branch", branches[0])
	for i, branch := range branches {
		if i > 0 {
			git(work, "checkout", "--quiet", "-b", branch, branches[0])
		}
		for path, content := range files[branch] {
			full := filepath.Join(work, path)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		git(work, "add", "-A")
		git(work, "commit", "--quiet", "--allow-empty", "-m", "commit on "+branch)
	}
	git(root, "clone", "--quiet", "--bare", work, bare)
	git(bare, "symbolic-ref", "HEAD", "refs/heads/"+branches[0])
	git(bare, "update-server-info")
	return root
}
