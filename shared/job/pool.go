package job

import (
	"context"
	"fmt"
	"strings"

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

// poolWorkspace is what the sandboxes of a pool of size n are and what its
// jobs' sessions copy: the pool's version (pool.Version) is of it.
func poolWorkspace(n int) registry.WorkspaceConfig {
	return registry.WorkspaceConfig{WarmPoolSize: n}
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
				out = append(out, registry.AgentType{ID: PoolType(p.ID), Name: p.Name, Workspace: poolWorkspace(p.WarmPoolSize)})
			}
		}
		if next == "" || next == cursor {
			return out, nil
		}
		cursor = next
	}
}
