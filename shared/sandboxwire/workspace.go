package sandboxwire

import (
	"errors"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// TaskContext is the task a session is created for (create's task_context):
// the repository and branch it is about, and the pull request, if any. The
// sandbox writes it to TaskFile in the workspace and tells the agent.
type TaskContext struct {
	RepositoryURL     string `json:"repository_url,omitempty"`
	Branch            string `json:"branch,omitempty"`
	PullRequestNumber int    `json:"pull_request_number,omitempty"`
	BaseBranch        string `json:"base_branch,omitempty"`
}

// WorkspaceSpec is the workspace a sandbox provisions before it reports
// ready (Spec.Workspace; nil: the session's type has none): the repository
// to clone (none: an empty workspace), at which branch, then the setup
// commands in order, each bounded by SetupTimeoutSeconds.
type WorkspaceSpec struct {
	RepositoryURL string `json:"repository_url,omitempty"`
	Branch        string `json:"branch,omitempty"`
	// NoCheckout leaves the repository unchecked-out (checkout_on_start
	// false): the workspace is an empty repository with the repository as
	// its origin and the branch as its own, which a git pull checks out.
	NoCheckout          bool         `json:"no_checkout,omitempty"`
	SetupCommands       []string     `json:"setup_commands,omitempty"`
	SetupTimeoutSeconds int          `json:"setup_timeout_seconds"`
	Task                *TaskContext `json:"task_context,omitempty"`
	// InsecureHosts are the hosts the operator lets a workspace clone from
	// over plain http or git, and the only internal ones it may clone from
	// (CheckCloneURL).
	InsecureHosts []string `json:"git_insecure_hosts,omitempty"`
	// Saved is what the session's configuration saved, brought back while
	// provisioning (SavedConfiguration); nil: nothing.
	Saved *SavedConfiguration `json:"saved,omitempty"`
}

// TaskFile is where, under the workspace, the sandbox writes the task
// context (JSON) for the agent and its tools.
const TaskFile = ".remote-agent/task.json"

// Workspace statuses, as ready reports them and create answers them.
const (
	// WorkspaceReady: provisioned; its warnings say what of the setup was
	// not done (a setup command that failed or timed out and those after
	// it, a snapshot not restored, an env file not written): the workspace
	// holds the repository, set up in part.
	WorkspaceReady = "ready"
	// WorkspaceDegraded: the workspace could not be provisioned (the clone
	// failed, or its folder could not be made): the agent runs without it,
	// in an empty folder (the spec's degraded mode).
	WorkspaceDegraded = "degraded"
	// WorkspaceNone: the session's type has no workspace.
	WorkspaceNone = "none"
)

// WorkspaceStatus is how provisioning went: a status and, when degraded, why.
type WorkspaceStatus struct {
	Status   string   `json:"status"`
	Warnings []string `json:"warnings"`
}

// Limits of a workspace status report.
const (
	MaxWorkspaceWarnings     = 16
	MaxWorkspaceWarningBytes = 1024
)

// DefaultInsecureGitHosts are the hosts a workspace may clone from over
// plain http or git when the operator lists none: loopback, so that local
// runs can serve a repository.
var DefaultInsecureGitHosts = []string{"127.0.0.1", "localhost", "::1"}

// Limits of a task context and of a clone URL.
const (
	MaxCloneURLBytes   = 2048
	MaxBranchNameBytes = 255
	MaxPullRequest     = 1 << 30
)

var (
	branchName = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)
	hostName   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)
)

// ValidBranch is git's rule for a branch name, as far as a clone needs it:
// never an option (no leading '-'), no "..", no empty or hidden component,
// no ".lock" end, letters, digits, '.', '_', '-' and '/' only.
func ValidBranch(b string) bool {
	if b == "" || len(b) > MaxBranchNameBytes || !branchName.MatchString(b) || strings.HasPrefix(b, "-") ||
		strings.Contains(b, "..") || strings.HasSuffix(b, ".lock") || strings.HasSuffix(b, ".") {
		return false
	}
	for _, part := range strings.Split(b, "/") {
		if part == "" || strings.HasPrefix(part, ".") {
			return false
		}
	}
	return true
}

// CheckCloneURL accepts the URL of a repository a workspace may clone: https
// to any host; http and git only to one of insecureHosts; never file:, ext::
// or any other transport, never credentials, a query or a fragment. A host
// that is an internal address (InternalAddress: loopback, private,
// link-local, the cloud's metadata service…) or a localhost name is refused
// too, whatever the scheme, unless insecureHosts lists it: the sandbox, which
// resolves names, refuses those that resolve to one (package provision). Its
// errors never repeat the URL.
func CheckCloneURL(raw string, insecureHosts []string) error {
	if raw == "" {
		return errors.New("is empty")
	}
	if len(raw) > MaxCloneURLBytes {
		return errors.New("is too long")
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return errors.New("has spaces or control characters")
	}
	if strings.Contains(raw, "::") && !strings.Contains(raw, "://") {
		return errors.New("is a git remote helper (ext::, fd::…), which is never allowed")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return errors.New("must be an https URL of a repository, like https://github.com/org/repo")
	}
	if u.User != nil {
		return errors.New("must not carry credentials")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return errors.New("must have no query or fragment")
	}
	if strings.HasPrefix(u.Hostname(), "-") {
		return errors.New("has a host that is an option")
	}
	if numericForm(u.Hostname()) {
		return errors.New("names an IP address in a numeric form other than dotted decimal (like 2852039166 or 0xA9FEA9FE), which resolvers read as an address: write it as a.b.c.d")
	}
	if host := strings.ToLower(u.Hostname()); internalHost(host) && !slices.Contains(insecureHosts, host) {
		return errors.New("names an internal address (loopback, private or link-local), which only the hosts the operator lists (git_insecure_hosts) may")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http", "git":
		if slices.Contains(insecureHosts, strings.ToLower(u.Hostname())) {
			return nil
		}
		return errors.New("uses " + u.Scheme + ", which is only allowed to the hosts the operator lists (git_insecure_hosts); use an https URL")
	default:
		return errors.New("must be an https URL (http and git only to the hosts the operator lists; never file: or ext::)")
	}
}

// RedactURL returns raw without the credentials it may carry (user and
// password), for events and logs; what is not a URL becomes "(redacted)".
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(redacted)"
	}
	u.User = nil
	return u.String()
}

// InsecureHost reports whether h is a host name or IP address an operator
// may list in git_insecure_hosts.
func InsecureHost(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	return len(h) <= 253 && hostName.MatchString(h)
}

// The workspace's provisioning events, in the order a sandbox appends them:
// creating, cloning (if it clones), restoring, env_files (a saved
// configuration's, saved.go), one setup per command it runs, services (the
// configuration's), a warning for each thing that failed, then ready.
const (
	TypeWorkspaceCreating = "workspace.creating"
	TypeWorkspaceCloning  = "workspace.cloning"
	TypeWorkspaceSetup    = "workspace.setup"
	TypeWorkspaceWarning  = "workspace.warning"
	TypeWorkspaceReady    = "workspace.ready"
)

// WorkspaceCreating: the workspace directory is being made.
type WorkspaceCreating struct{}

// EventType implements Payload.
func (WorkspaceCreating) EventType() string { return TypeWorkspaceCreating }

// WorkspaceCloning: the repository (its URL without credentials) is being
// cloned, at Branch ("" for its default branch).
type WorkspaceCloning struct {
	RepositoryURL string `json:"repository_url"`
	Branch        string `json:"branch,omitempty"`
}

// EventType implements Payload.
func (WorkspaceCloning) EventType() string { return TypeWorkspaceCloning }

// WorkspaceSetup: setup command Index (from 1) of Total is starting.
type WorkspaceSetup struct {
	Command string `json:"command"`
	Index   int    `json:"index"`
	Total   int    `json:"total"`
}

// EventType implements Payload.
func (WorkspaceSetup) EventType() string { return TypeWorkspaceSetup }

// WorkspaceWarning: a phase (clone, setup) failed; the agent goes on without it.
type WorkspaceWarning struct {
	Phase   string `json:"phase"`
	Message string `json:"message"`
}

// EventType implements Payload.
func (WorkspaceWarning) EventType() string { return TypeWorkspaceWarning }

// WorkspaceReadyEvent: provisioning is over (Status ready or degraded).
type WorkspaceReadyEvent struct {
	WorkspaceStatus
}

// EventType implements Payload.
func (WorkspaceReadyEvent) EventType() string { return TypeWorkspaceReady }

// WorkspaceTypes are the provisioning event types (a sandbox's).
var WorkspaceTypes = []string{TypeWorkspaceCreating, TypeWorkspaceCloning, TypeWorkspaceRestoring, TypeWorkspaceEnvFiles, TypeWorkspaceSetup,
	TypeWorkspaceServices, TypeWorkspaceWarning, TypeWorkspaceReady}

// internalHost reports whether a URL's host (lower case, without brackets) is
// an internal address or a localhost name (RFC 6761).
// numericForm reports whether host is an IPv4 address in one of the forms
// inet_aton reads besides dotted decimal, which git's resolver takes as the
// address: one to four parts, each decimal, octal (a leading 0) or hex (0x),
// as in 2852039166, 0xA9FEA9FE, 0251.0376.0251.0376 or 169.254.43518. (A
// name of the DNS has a label with a letter that is no hex digit after
// 0x, so no name is one.)
func numericForm(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if _, err := netip.ParseAddr(host); err == nil || host == "" {
		return false
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return false
	}
	for _, p := range parts {
		digits, base := p, 10
		switch {
		case len(p) > 1 && (p[:2] == "0x" || p[:2] == "0X"):
			digits, base = p[2:], 16
		case len(p) > 1 && p[0] == '0':
			digits, base = p[1:], 8
		}
		valid := map[int]string{8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}[base]
		if p == "" || strings.IndexFunc(digits, func(r rune) bool { return !strings.ContainsRune(valid, r) }) >= 0 {
			return false
		}
	}
	return true
}

func internalHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && InternalAddress(ip)
}
