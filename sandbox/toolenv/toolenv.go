// Package toolenv is what the commands an agent runs in a sandbox run with:
// a scrubbed environment, never the agent's own, and, where the agent runs as
// root, another user.
//
// The environment of a command is an allowlist: the host variables
// (sandboxwire.HostVariables: PATH, HOME, LANG, LC_*, TERM…), the network's
// (sandboxwire.NetworkVariables: the egress proxy and the certificates to
// trust, where its launcher cut the sandbox off), WORKSPACE, and
// the env values the session's user submitted for the workspace (those of the
// env file), under their own names. Nothing else of the agent's environment
// reaches them: not its sandbox token or bootstrap code, not the platform's
// PROLIFERATE_* and RA_* settings, no model provider key, no AWS credentials
// or ECS credential endpoints.
package toolenv

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Workspace is the variable that names the workspace folder in a command's
// environment (as $WORKSPACE does in policy.toml).
const Workspace = "WORKSPACE"

// Env builds the environment of each command; safe for concurrent use.
type Env struct {
	mu     sync.RWMutex
	base   []string          // host variables, and WORKSPACE
	values map[string]string // the user's values
}

// New returns the environments of commands run in workspace by an agent
// whose environment is environ (os.Environ()); u, if not nil, is the user
// they run as, whose HOME, USER and LOGNAME they get.
func New(environ []string, workspace string, u *User) *Env {
	base := append(sandboxwire.HostEnv(environ), sandboxwire.NetworkEnv(environ)...)
	if u != nil {
		base = slices.DeleteFunc(base, func(kv string) bool {
			name, _, _ := strings.Cut(kv, "=")
			return name == "HOME" || name == "USER" || name == "LOGNAME"
		})
		base = append(base, "HOME="+u.Home, "USER="+u.Name, "LOGNAME="+u.Name)
	}
	return &Env{base: append(base, Workspace+"="+workspace)}
}

// SetValues replaces the user's values (the env file's whole content). A
// value whose name is reserved is left out.
func (e *Env) SetValues(values map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.values = maps.Clone(values)
}

// Environ returns the environment of one command: the base, then the user's
// values in the order of their names.
func (e *Env) Environ() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := slices.Clone(e.base)
	for _, name := range slices.Sorted(maps.Keys(e.values)) {
		if !Reserved(name) {
			out = append(out, name+"="+e.values[name])
		}
	}
	return out
}

var name = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// platform are prefixes and names of the platform's own variables: a user's
// value never passes for one of them.
var (
	platformPrefixes = []string{"RA_", "PROLIFERATE_", "AWS_", "ECS_"}
	platformNames    = []string{sandboxwire.EnvSandboxToken, Workspace}
)

// Reserved reports whether a user's value named n stays out of commands'
// environments: a malformed name, a host variable (PATH, HOME… stay the
// sandbox's), a network variable (HTTPS_PROXY, SSL_CERT_FILE…), or a name of the platform's (RA_*, PROLIFERATE_*, AWS_*, ECS_*,
// SANDBOX_MCP_AUTH_TOKEN, WORKSPACE). The value is still in the env file.
func Reserved(n string) bool {
	if !name.MatchString(n) || sandboxwire.FromHost(n) || sandboxwire.FromNetwork(n) || slices.Contains(platformNames, n) {
		return true
	}
	return slices.ContainsFunc(platformPrefixes, func(p string) bool { return strings.HasPrefix(n, p) })
}

// Git returns the environment of a git command run in workspace, from a
// command's environment (Env.Environ; nil: the agent's own, os.Environ()):
// every GIT_* variable of it dropped but the network's GIT_SSL_CAINFO (none
// may point git at another
// repository or configuration), no system configuration
// (GIT_CONFIG_NOSYSTEM), no repository discovery above the workspace
// (GIT_CEILING_DIRECTORIES), no pager, no terminal prompt, no editor (an
// editor would wait for a terminal: a commit needs its message).
func Git(environ []string, workspace string) []string {
	if environ == nil {
		environ = os.Environ()
	}
	out := slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return (strings.HasPrefix(name, "GIT_") && !sandboxwire.FromNetwork(name)) || name == "PAGER" || name == "EDITOR" || name == "VISUAL"
	})
	return append(out,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(workspace),
		"GIT_PAGER=cat", "PAGER=cat",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_EDITOR=false", "GIT_SEQUENCE_EDITOR=false",
		"GIT_ASKPASS=", "SSH_ASKPASS=",
		"GIT_OPTIONAL_LOCKS=0",
	)
}
