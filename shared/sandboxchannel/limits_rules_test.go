package sandboxchannel_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxchannel"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
	"github.com/remote-agents/remote-agents/shared/token"
)

// A heartbeat of a session over one of its limits (the platform's, its
// agent type's, its app key's: the lowest holds) tells its sandbox to stop
// and ends the session with that limit's reason: the tokens its model calls
// used, their cost, its time since create, its time without activity (a
// busy heartbeat is activity, a heartbeat by itself is not). Under every
// limit, the sandbox goes on.
func TestHeartbeatEndsASessionOverALimit(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	platform := registry.SessionLimits{MaxSessionSeconds: 3600, IdleTimeoutSeconds: 3}
	tests := []struct {
		name string
		// typ and app are the type's and the app key's limits.
		typ, app *registry.SessionLimits
		usage    session.Usage
		// beats are heartbeats, each after its delay, busy or not.
		beats []time.Duration
		busy  bool
		want  session.Reason
	}{
		{"tokens", &registry.SessionLimits{MaxTokens: 10}, nil, session.Usage{InputTokens: 8, OutputTokens: 4, Calls: 1}, []time.Duration{time.Second}, false, session.ReasonTokenBudget},
		{"tokens left", &registry.SessionLimits{MaxTokens: 20}, nil, session.Usage{InputTokens: 8, OutputTokens: 4, Calls: 1}, []time.Duration{time.Second}, false, ""},
		{"cost", &registry.SessionLimits{MaxCostUSD: 0.01}, nil, session.Usage{InputTokens: 1, Calls: 1, CostMicroUSD: 20000}, []time.Duration{time.Second}, false, session.ReasonCostBudget},
		{"the type's time", &registry.SessionLimits{MaxSessionSeconds: 2, IdleTimeoutSeconds: 600}, nil, session.Usage{}, []time.Duration{time.Second, time.Second}, true, session.ReasonMaxDuration},
		{"the app key's time", nil, &registry.SessionLimits{MaxSessionSeconds: 2}, session.Usage{}, []time.Duration{time.Second, time.Second}, true, session.ReasonMaxDuration},
		{"idle", nil, nil, session.Usage{}, []time.Duration{time.Second, time.Second, time.Second}, false, session.ReasonIdleTimeout},
		{"busy is not idle", nil, nil, session.Usage{}, []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := created
			store := storetest.NewMemory()
			store.Now = func() time.Time { return now }
			tok, hash := token.New(token.Sandbox)
			sess := session.Session{ID: "0b7d4b8e-8c1e-4a55-9d7f-1f2e3d4c5b6a", State: session.Idle, Generation: 1, SandboxTokenHash: hash,
				Blueprint: session.Blueprint{
					AppLimits: tt.app,
				},
				CreatedAt: created, ReadyAt: created, UpdatedAt: created}
			if tt.typ != nil {
				sess.AgentType, sess.Workspace = "limited", &registry.WorkspaceConfig{SessionLimits: tt.typ}
			}
			if err := store.Create(t.Context(), sess, nil); err != nil {
				t.Fatal(err)
			}
			if tt.usage != (session.Usage{}) {
				if err := store.AddUsage(t.Context(), sess.ID, tt.usage); err != nil {
					t.Fatal(err)
				}
			}
			ch := sandboxchannel.New(sandboxchannel.Options{Store: store, Limits: platform, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }})
			var orders sandboxwire.Orders
			for _, d := range tt.beats {
				now = now.Add(d)
				var err error
				if orders, err = ch.Heartbeat(t.Context(), sess.ID, tok, sandboxwire.HeartbeatReport{Busy: tt.busy}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := store.Get(t.Context(), sess.ID)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if orders.Stop || got.State != session.Idle {
					t.Errorf("under its limits: orders %+v, state %s (%s)", orders, got.State, got.Reason)
				}
				return
			}
			if !orders.Stop || got.State != session.Ending || got.Reason != tt.want {
				t.Errorf("orders %+v, state %s reason %q; want stop, ending with %q", orders, got.State, got.Reason, tt.want)
			}
		})
	}
}
