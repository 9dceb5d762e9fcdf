package session_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/session"
)

// TestEffectiveLimitsTakeTheLowestOfEachPart: the platform's, the agent
// type's and the app key's limits, each part the lowest of those set (0:
// none at that level).
func TestEffectiveLimitsTakeTheLowestOfEachPart(t *testing.T) {
	platform := registry.SessionLimits{MaxSessionSeconds: 86400, IdleTimeoutSeconds: 3600}
	sess := session.Session{
		Blueprint: session.Blueprint{
			Workspace: &registry.WorkspaceConfig{SessionLimits: &registry.SessionLimits{IdleTimeoutSeconds: 600, MaxTokens: 5000}},
			AppLimits: &registry.SessionLimits{MaxSessionSeconds: 7200, MaxTokens: 9000, MaxCostUSD: 2.5},
		},
	}
	want := registry.SessionLimits{MaxSessionSeconds: 7200, IdleTimeoutSeconds: 600, MaxTokens: 5000, MaxCostUSD: 2.5}
	if got := session.EffectiveLimits(platform, sess); got != want {
		t.Errorf("EffectiveLimits = %+v, want %+v", got, want)
	}
	if got := session.EffectiveLimits(platform, session.Session{}); got != platform {
		t.Errorf("without type or app limits: %+v", got)
	}
}
