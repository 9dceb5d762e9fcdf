package job

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/registry"
)

// A profile with a warm_pool_size keeps that many idle sandboxes for its
// jobs, in the warm pool (package pool) as an agent type of the platform
// named PoolType(profile): no workspace, the default size. A job of the
// profile whose constraints ask for no more memory than that starts in
// one of them (Prepare gives its session that type), the way a session of
// an agent type with a pool does.

// PoolTypePrefix starts the agent type a profile's pool is kept under; no
// agent type can be named so (agenttype.ValidID takes no '.').
const PoolTypePrefix = "job."

// PoolType is the agent type of profile id's warm pool.
func PoolType(id string) string { return PoolTypePrefix + id }

// IsPoolType reports whether agentType is a profile's pool.
func IsPoolType(agentType string) bool { return strings.HasPrefix(agentType, PoolTypePrefix) }

// poolWorkspace is what the sandboxes of profile p's pool are and what its
// jobs' sessions copy: the pool's version (pool.Version) is of it. A pool
// is for the jobs without network (the default), so where those run cut
// off (offline) so do its sandboxes, and a job with network starts cold.
func poolWorkspace(p Profile) registry.WorkspaceConfig {
	ws := registry.WorkspaceConfig{WarmPoolSize: p.WarmPoolSize}
	if offline(p, false) {
		none := egress.None()
		ws.Egress = &none
	}
	return ws
}

// offline reports whether a job of profile p runs in a sandbox cut off from
// every network but the platform's: one without network (network false)
// whose tools include bash, the one tool that could reach a network (a
// job without network has no web tools). Its launch, not a namespace the
// sandbox makes, keeps it off the network: a Fargate task cannot make one.
func offline(p Profile, network bool) bool {
	return !network && slices.Contains(p.AllowedSkills, "bash")
}

// ProfileLister pages through the profiles (Store has it).
type ProfileLister interface {
	Profiles(ctx context.Context, cursor string, limit int) ([]Profile, string, error)
}

// PoolTypes lists the pools of the profiles that keep one as the warm pool
// takes agent types (pool.Types).
type PoolTypes struct{ Profiles ProfileLister }

// Pooled returns an agent type for each profile with a warm_pool_size.
func (t PoolTypes) Pooled(ctx context.Context) ([]registry.AgentType, error) {
	var out []registry.AgentType
	cursor := ""
	for {
		ps, next, err := t.Profiles.Profiles(ctx, cursor, 100)
		if err != nil {
			return nil, fmt.Errorf("profiles with a warm pool: %w", err)
		}
		for _, p := range ps {
			if p.WarmPoolSize > 0 {
				out = append(out, registry.AgentType{ID: PoolType(p.ID), Name: p.Name, Workspace: poolWorkspace(p)})
			}
		}
		if next == "" || next == cursor {
			return out, nil
		}
		cursor = next
	}
}
