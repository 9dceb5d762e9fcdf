package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/toolenv"
)

// gitTimeout bounds one git command.
const gitTimeout = 60 * time.Second

// gitCommand is what one git subcommand takes: flags (no value), options
// that take a value (as "--opt=value", or "--opt value" for those in
// separate), and what its other arguments are.
type gitCommand struct {
	flags  []string
	valued []string
	// separate are the valued options that may take their value as the next
	// argument.
	separate []string
	// pathsOnly: every argument that is not an option is a path (add,
	// restore); otherwise they are revisions, with paths after "--".
	pathsOnly bool
	// noPaths: the subcommand takes no "--" and no paths (checkout, switch,
	// branch, rev-parse).
	noPaths bool
	// maxArgs bounds the arguments that are not options (0: no bound).
	maxArgs int
}

var (
	logFlags = []string{"--oneline", "--stat", "--shortstat", "--name-only", "--name-status", "--numstat", "-p", "--patch",
		"--no-patch", "-s", "--graph", "--decorate", "--no-decorate", "--all", "--reverse", "--first-parent", "--no-merges",
		"--merges", "--abbrev-commit", "--no-color", "--follow"}
	logValued = []string{"-n", "--max-count", "--skip", "--since", "--until", "--after", "--before", "--author",
		"--committer", "--grep", "--format", "--pretty", "--date", "-U", "--unified"}
	diffFlags = []string{"--cached", "--staged", "--stat", "--shortstat", "--numstat", "--name-only", "--name-status",
		"--no-color", "-w", "--ignore-all-space", "-b", "--ignore-space-change", "--word-diff", "--check", "-R", "--summary"}
)

// gitCommands are the subcommands the git tool runs, and what each takes.
// Nothing else passes: no option that runs a program or reads configuration
// from the command line (-c, --config, --exec, --upload-pack, -u,
// --ext-diff, --textconv, --output…), no alias, no other subcommand.
var gitCommands = map[string]gitCommand{
	"status": {flags: []string{"-s", "--short", "-b", "--branch", "--porcelain", "--long", "--ignored", "--no-renames"},
		valued: []string{"--porcelain", "--untracked-files"}},
	"diff":      {flags: diffFlags, valued: []string{"-U", "--unified", "--diff-filter"}},
	"log":       {flags: logFlags, valued: logValued, separate: []string{"-n", "--max-count", "--author", "--grep", "--since", "--until"}},
	"show":      {flags: append(slices.Clone(diffFlags), "--oneline", "-s", "--no-patch", "--abbrev-commit"), valued: []string{"--format", "--pretty", "-U", "--unified"}},
	"add":       {flags: []string{"-A", "--all", "--update", "-N", "--intent-to-add", "--dry-run", "-v", "--verbose"}, pathsOnly: true},
	"commit":    {flags: []string{"-a", "--all", "--amend", "--no-edit", "--allow-empty", "-q", "--quiet"}, valued: []string{"-m", "--message", "--author", "--date"}, separate: []string{"-m", "--message", "--author"}, pathsOnly: true},
	"checkout":  {flags: []string{"--detach", "-q", "--quiet"}, valued: []string{"-b"}, separate: []string{"-b"}, noPaths: true, maxArgs: 1},
	"switch":    {flags: []string{"--detach", "-q", "--quiet"}, valued: []string{"-c", "--create"}, separate: []string{"-c", "--create"}, noPaths: true, maxArgs: 1},
	"branch":    {flags: []string{"-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "--list", "--show-current", "-d", "--delete", "--merged", "--no-merged", "-m", "--move"}, noPaths: true, maxArgs: 2},
	"restore":   {flags: []string{"--staged", "-S", "--worktree", "-W", "-q", "--quiet"}, valued: []string{"--source", "-s"}, separate: []string{"--source", "-s"}, pathsOnly: true},
	"rev-parse": {flags: []string{"--abbrev-ref", "--short", "--verify", "--quiet", "-q", "--show-toplevel", "--is-inside-work-tree", "--symbolic-full-name"}, noPaths: true, maxArgs: 4},
}

// gitOverrides are set on every git command: no hooks, no fsmonitor, no
// signing program, no pager, no external diff, whatever the repository's
// configuration says.
var gitOverrides = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.pager=cat",
	"-c", "commit.gpgSign=false",
	"-c", "color.ui=false",
	// Discovery stops at the workspace (GIT_CEILING_DIRECTORIES); its
	// repository may be another user's (provisioning clones it).
	"-c", "safe.directory=*",
	"--no-pager",
}

// unsafeGitConfig are configuration keys (git config --list, lower case)
// that make git run a program on the subcommands the tool runs: a repository
// whose configuration sets one is refused.
var unsafeGitConfig = regexp.MustCompile(`^(filter\..*|diff\.external|diff\..*\.(command|textconv)|core\.(fsmonitor|pager|editor|sshcommand|gitproxy|askpass|alternaterefscommand)|pager\..*|sequence\.editor|gpg\..*|merge\..*\.driver|credential\..*|include\..*|includeif\..*|alias\..*|uploadpack\..*|remote\..*\.(uploadpack|receivepack))$`)

// gitTool runs a fixed set of git subcommands in the workspace.
func gitTool(p *policy.Policy, o Options) Tool {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range gitCommands {
			if !yield(n) {
				return
			}
		}
	})
	enum, _ := json.Marshal(names)
	return Tool{
		Name: "git",
		Description: "Run git in the workspace's repository: " + strings.Join(names, ", ") +
			". Options are limited to a safe set per subcommand; paths must be in the workspace and go after \"--\" (add and restore take only paths). A commit needs -m.",
		Schema: `{"type":"object","additionalProperties":false,"required":["subcommand"],"properties":{
			"subcommand":{"type":"string","enum":` + string(enum) + `},
			"args":{"type":"array","maxItems":64,"items":{"type":"string","maxLength":4096}}}}`,
		Run: func(ctx context.Context, raw json.RawMessage) (string, error) {
			a, err := decode[struct {
				Subcommand string
				Args       []string
			}](raw)
			if err != nil {
				return "", err
			}
			args, err := checkGitArgs(p, a.Subcommand, a.Args)
			if err != nil {
				return "", err
			}
			var env []string
			if o.Env != nil {
				env = o.Env()
			}
			g := gitRun{dir: p.Workspace(), env: toolenv.Git(env, p.Workspace()), user: o.User}
			if err := g.checkConfig(ctx); err != nil {
				return "", err
			}
			return g.run(ctx, append([]string{a.Subcommand}, args...))
		},
	}
}

// checkGitArgs checks one call's arguments against its subcommand's
// allowlist and the policy, and returns them as git is to get them.
func checkGitArgs(p *policy.Policy, sub string, args []string) ([]string, error) {
	c, ok := gitCommands[sub]
	if !ok {
		return nil, fmt.Errorf("git %s is not one of the subcommands the git tool runs", sub)
	}
	var out []string
	positional := 0
	paths := false
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if strings.ContainsRune(arg, 0) {
			return nil, errors.New("git: an argument holds a NUL byte")
		}
		switch {
		case paths || (c.pathsOnly && !strings.HasPrefix(arg, "-")):
			if c.noPaths {
				return nil, fmt.Errorf("git %s takes no paths", sub)
			}
			if _, err := p.CheckPath("git", arg); err != nil {
				return nil, err
			}
			if !paths {
				out = append(out, "--")
				paths = true
			}
			out = append(out, arg)
		case arg == "--":
			if c.noPaths {
				return nil, fmt.Errorf("git %s takes no paths", sub)
			}
			out = append(out, arg)
			paths = true
		case strings.HasPrefix(arg, "-"):
			name, _, hasValue := strings.Cut(arg, "=")
			switch {
			case !hasValue && slices.Contains(c.flags, arg):
				out = append(out, arg)
			case hasValue && slices.Contains(c.valued, name):
				out = append(out, arg)
			case !hasValue && slices.Contains(c.separate, arg):
				if i+1 >= len(args) {
					return nil, fmt.Errorf("git %s: %s needs a value", sub, arg)
				}
				// Given as one argument, the value is never read as an option.
				if strings.HasPrefix(arg, "--") {
					out = append(out, arg+"="+args[i+1])
				} else {
					out = append(out, arg+args[i+1])
				}
				i++
			case isShortNumeric(arg, c.valued):
				out = append(out, arg)
			default:
				return nil, fmt.Errorf("git %s: option %s is not allowed (allowed: %s)", sub, name, strings.Join(slices.Concat(c.flags, c.valued), " "))
			}
		default:
			positional++
			if c.maxArgs > 0 && positional > c.maxArgs {
				return nil, fmt.Errorf("git %s takes at most %d arguments besides options", sub, c.maxArgs)
			}
			// A revision may be a path too (git diff of two paths, one outside
			// the repository, compares the files): one that names a file, or
			// reads like a path out of the workspace, passes the policy.
			if pathLike(p, arg) {
				if _, err := p.CheckPath("git", arg); err != nil {
					return nil, err
				}
			}
			out = append(out, arg)
		}
	}
	return out, nil
}

// pathLike reports whether a revision argument could be read as a path that
// leaves the workspace: absolute, from home, with a ".." element, or naming
// something that exists (a link may lead out).
func pathLike(p *policy.Policy, arg string) bool {
	if filepath.IsAbs(arg) || strings.HasPrefix(arg, "~") || slices.Contains(strings.Split(arg, "/"), "..") {
		return true
	}
	_, err := os.Lstat(filepath.Join(p.Workspace(), arg))
	return err == nil
}

// isShortNumeric: "-n5", "-U3" for the valued short options -n and -U.
func isShortNumeric(arg string, valued []string) bool {
	if len(arg) < 3 || !slices.Contains(valued, arg[:2]) {
		return false
	}
	for _, r := range arg[2:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

var errGitOutputTooLong = errors.New("git: output too long")

// gitRun is how git runs: where, with which environment, as whom.
type gitRun struct {
	dir  string
	env  []string
	user *toolenv.User
}

// checkConfig refuses a repository whose configuration (its own, the user's)
// would have git run a program.
func (g gitRun) checkConfig(ctx context.Context) error {
	out, err := g.output(ctx, []string{"config", "--list", "--no-includes", "-z"})
	if errors.Is(err, errGitOutputTooLong) {
		return errors.New("git: the repository's configuration is too long to check")
	}
	if err != nil {
		// git's own failure (no repository…): the command that follows
		// reports it.
		return nil //nolint:nilerr // reported by the command itself
	}
	for _, entry := range strings.Split(out, "\x00") {
		key, _, _ := strings.Cut(entry, "\n")
		if unsafeGitConfig.MatchString(strings.ToLower(key)) {
			return fmt.Errorf("git: the repository's configuration sets %s, which the git tool does not run with", key)
		}
	}
	return nil
}

// command is git with args, after the overrides.
func (g gitRun) command(ctx context.Context, overrides, args []string) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, "git", append(slices.Clone(overrides), args...)...)
	cmd.Dir = g.dir
	cmd.Env = g.env
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: g.user.Credential()}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	return cmd, nil
}

func (g gitRun) output(ctx context.Context, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	// The configuration as the repository has it, not as the tool overrides
	// it (reading configuration runs nothing).
	cmd, err := g.command(ctx, []string{"-c", "safe.directory=*"}, args)
	if err != nil {
		return "", err
	}
	out := &capped{max: 4 * maxOutputBytes}
	cmd.Stdout = out
	if err := cmd.Run(); err != nil {
		return "", err
	}
	if out.dropped > 0 {
		return "", errGitOutputTooLong
	}
	return out.buf.String(), nil
}

// run runs git with args and reports its exit code and output, as bash does.
func (g gitRun) run(ctx context.Context, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	cmd, err := g.command(ctx, gitOverrides, args)
	if err != nil {
		return "", err
	}
	stdout, stderr := &capped{max: maxOutputBytes}, &capped{max: maxOutputBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "", fmt.Errorf("git timed out after %s", gitTimeout)
	}
	return commandResult("git", err, stdout, stderr)
}
