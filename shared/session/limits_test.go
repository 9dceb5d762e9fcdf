package session_test

import (
	"testing"
	"time"

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

// A sandbox of the sandbox API lives until its timeout, used or not, as
// E2B's do: no idle limit ends it (its commands and files are not its
// agent's activity), and nothing of one shows; its other limits hold.
func TestSandboxOfTheSandboxAPIHasNoIdleLimit(t *testing.T) {
	platform := registry.SessionLimits{MaxSessionSeconds: 86400, IdleTimeoutSeconds: 30}
	created := time.Unix(1_000_000, 0)
	sess := session.Session{ID: "s", State: session.Idle, CreatedAt: created, ReadyAt: created,
		Blueprint: session.Blueprint{Workspace: &registry.WorkspaceConfig{SessionLimits: &registry.SessionLimits{IdleTimeoutSeconds: 10}},
			Sandbox: &session.SandboxOptions{Template: "base"}}, EndsAt: created.Add(time.Hour)}
	limits := session.EffectiveLimits(platform, sess)
	if want := (registry.SessionLimits{MaxSessionSeconds: 86400}); limits != want {
		t.Errorf("EffectiveLimits = %+v, want %+v", limits, want)
	}
	later := created.Add(10 * time.Minute)
	if why := session.OverLimit(limits, sess, later); why != "" {
		t.Errorf("idle 10 minutes before its end: over limit %q", why)
	}
	if r := session.RemainingOf(limits, sess, later); r.IdleSeconds != nil {
		t.Errorf("remaining idle seconds %d, want none", *r.IdleSeconds)
	}
	if why := session.OverLimit(limits, sess, created.Add(time.Hour)); why != session.ReasonTimeout {
		t.Errorf("at its end: %q, want %q", why, session.ReasonTimeout)
	}
	// An agent idle as long is ended.
	sess.Sandbox, sess.EndsAt = nil, time.Time{}
	if why := session.OverLimit(session.EffectiveLimits(platform, sess), sess, later); why != session.ReasonIdleTimeout {
		t.Errorf("an agent idle 10 minutes: %q, want %q", why, session.ReasonIdleTimeout)
	}
}
