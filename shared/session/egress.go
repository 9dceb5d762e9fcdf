package session

import (
	"net"
	"net/url"
	"slices"

	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// EgressFor is the egress policy a sandbox of workspace w starts with: its
// agent type's, the host of the repository it clones added to an allowlist
// (the workspace is made of it, and its git tool pulls and pushes there);
// nil (open) for a session without a type, or of a type stored before
// policies.
func EgressFor(w *registry.WorkspaceConfig, task *sandboxwire.TaskContext) *egress.Policy {
	if w == nil || w.Egress == nil {
		return nil
	}
	p := egress.Policy{Mode: w.Egress.Mode, Allow: slices.Clone(w.Egress.Allow)}
	if p.Allow == nil {
		p.Allow = []string{}
	}
	if p.Mode != egress.ModeAllowlist {
		return &p
	}
	if ws := WorkspaceFor(w, task, nil); ws != nil && ws.RepositoryURL != "" {
		if dest := repositoryDestination(ws.RepositoryURL); dest != "" && !slices.Contains(p.Allow, dest) {
			p.Allow = append(p.Allow, dest)
		}
	}
	return &p
}

// repositoryDestination is the host:port a repository URL is fetched from
// ("" if it names none an allow list can hold).
func repositoryDestination(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80", "git": "9418", "ssh": "22"}[u.Scheme]
	}
	if port == "" {
		return ""
	}
	dest := net.JoinHostPort(u.Hostname(), port)
	if (egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{dest}}).Problem("") != "" {
		return ""
	}
	return dest
}

// egressView is sess's policy as apps read it: its allow list a list.
func egressView(sess Session) *egress.Policy {
	p := sess.EgressPolicy()
	if p.Allow == nil {
		p.Allow = []string{}
	}
	return &p
}
