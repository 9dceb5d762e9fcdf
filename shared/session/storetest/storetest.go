// Package storetest is the contract of the session store's roles, run
// against every implementation: one suite per role (RunLifecycle,
// RunLaunches, RunEventLog, RunLifeEvents, RunEndRacesChanges, RunAppEvents, RunMetering, RunBudgets, RunQuotaCounts, RunFleet,
// RunPushConnections) checks a store against the role's documented
// behaviour, Run checks all of them, and Memory, an in-memory store for unit tests of logic, passes it as
// dynamo.Sessions does against DynamoDB Local.
package storetest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Run checks the store newStore returns against the contract of every role
// of session.Store. Each subtest calls newStore once and runs in parallel with
// the others; subtests use fresh session ids and keys, so newStore may return
// the same store every time.
func Run(t *testing.T, newStore func(t *testing.T) session.Store) {
	t.Run("lifecycle", func(t *testing.T) {
		t.Parallel()
		RunLifecycle(t, func(t *testing.T) session.Lifecycle { return newStore(t) })
	})
	t.Run("launches", func(t *testing.T) {
		t.Parallel()
		RunLaunches(t, func(t *testing.T) LaunchStore { return newStore(t) })
	})
	t.Run("event log", func(t *testing.T) {
		t.Parallel()
		RunEventLog(t, func(t *testing.T) EventStore { return newStore(t) })
	})
	t.Run("life events", func(t *testing.T) {
		RunLifeEvents(t, func(t *testing.T) EventStore { return newStore(t) })
	})
	t.Run("an end racing changes", func(t *testing.T) {
		RunEndRacesChanges(t, func(t *testing.T) EventStore { return newStore(t) })
	})
	t.Run("app events", func(t *testing.T) {
		RunAppEvents(t, func(t *testing.T) EventStore { return newStore(t) })
	})
	t.Run("metering", func(t *testing.T) {
		t.Parallel()
		RunMetering(t, func(t *testing.T) MeteringStore { return newStore(t) })
	})
	t.Run("budgets", func(t *testing.T) {
		t.Parallel()
		RunBudgets(t, func(t *testing.T) BudgetStore { return newStore(t) })
	})
	t.Run("quota counts", func(t *testing.T) {
		t.Parallel()
		RunQuotaCounts(t, func(t *testing.T) QuotaStore { return newStore(t) })
	})
	t.Run("fleet", func(t *testing.T) { t.Parallel(); RunFleet(t, func(t *testing.T) FleetStore { return newStore(t) }) })
	t.Run("push connections", func(t *testing.T) {
		t.Parallel()
		RunPushConnections(t, func(t *testing.T) PushStore { return newStore(t) })
	})
}

// The stores the role suites check: each role, with session.Lifecycle to
// make and move the sessions its cases work on.
type (
	// LaunchStore is checked by RunLaunches.
	LaunchStore interface {
		session.Lifecycle
		session.Launches
	}
	// EventStore is checked by RunEventLog.
	EventStore interface {
		session.Lifecycle
		session.EventLog
	}
	// MeteringStore is checked by RunMetering.
	MeteringStore interface {
		session.Lifecycle
		session.Metering
	}
	// BudgetStore is checked by RunBudgets.
	BudgetStore interface {
		session.Lifecycle
		session.Budgets
	}
	// QuotaStore is checked by RunQuotaCounts.
	QuotaStore interface {
		session.Lifecycle
		session.QuotaCounts
	}
	// FleetStore is checked by RunFleet.
	FleetStore interface {
		session.Lifecycle
		session.Fleet
	}
	// PushStore is checked by RunPushConnections (a launch claim forgets
	// the push connection).
	PushStore interface {
		session.Lifecycle
		session.Launches
		session.PushConnections
	}
)

// sample returns a new session in state of generation gen, with every kind of
// field set.
func sample(t *testing.T, state session.State, gen int) session.Session {
	t.Helper()
	id := newID(t)
	now := time.Now().UTC()
	s := session.Session{
		ID: id, Blueprint: session.Blueprint{
			ProjectName:     "demo",
			PersonaSlug:     "assistant",
			InitialPrompt:   "Hello",
			Features:        session.Features{FileUpload: true, VoiceMic: true},
			SessionType:     "setup",
			ClientType:      "automation",
			ConfigurationID: "cfg-1",
			TmuxSessionName: "ra-" + id[:8],
			AgentType:       "coder",
			Workspace: &registry.WorkspaceConfig{
				Enabled: true, RepoSource: registry.RepoSource{Type: registry.RepoFixed, URL: "https://example.com/org/repo.git", Branch: "main"},
				Tools: []string{"read", "grep"}, ResourceLimits: registry.ResourceLimits{CPU: "2", Memory: "4G", Disk: "40G"},
				SetupCommands: []string{"make"}, SetupTimeoutSeconds: 300, WarmPoolSize: 1,
				// As a validated configuration holds it (agenttype.Validate):
				// left out, it would read back as the default it stands for.
				CheckoutOnStart: new(false),
			},
			Sandbox: &session.SandboxOptions{Template: "coder", Metadata: map[string]string{"user": "u-1"}, Env: map[string]string{"A": "b"}, AutoPause: true},
		},

		AppKeyID: "key-1", Tenant: "tenant-1",

		State: state, Generation: gen, TokenHashes: []string{"hash-0"},
		CreatedAt: now, UpdatedAt: now,
	}
	if state.Terminal() {
		s.Reason, s.EndedAt = session.ReasonError, now
	}
	return s
}

// create creates s and answers it as the store holds it (an app's agent's
// stream starts with agent.created: LastSeq 1).
func create(t *testing.T, st session.Lifecycle, s session.Session) session.Session {
	t.Helper()
	if err := st.Create(t.Context(), s, nil); err != nil {
		t.Fatalf("create %s: %v", s.ID, err)
	}
	got, err := st.Get(t.Context(), s.ID)
	if err != nil {
		t.Fatalf("get %s: %v", s.ID, err)
	}
	return got
}

func record(t *testing.T, kind, sessionID string) session.IdempotencyRecord {
	t.Helper()
	now := time.Now().UTC()
	return session.IdempotencyRecord{
		Key: kind + "#" + newID(t), SessionID: sessionID, RequestHash: "request-hash",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour).Unix(),
	}
}

// newID returns a random session id (a UUID v4).
func newID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// notBefore checks that the timestamp field was set, to a time not before t.
func notBefore(t *testing.T, field string, at, before time.Time) {
	t.Helper()
	if at.Before(before.Truncate(time.Millisecond)) {
		t.Errorf("%s %s: want a time not before %s", field, at, before)
	}
}

// toMilli is t to the millisecond, as stores keep due times.
func toMilli(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }
