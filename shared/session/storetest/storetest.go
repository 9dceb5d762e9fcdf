// Package storetest is the contract of session.Store, run against every
// implementation: Run checks a store against the interface's documented
// behaviour, and Memory, an in-memory store for unit tests of logic, passes it as
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

// Run checks the store newStore returns against the session.Store contract. Each
// subtest calls newStore once and runs in parallel with the others; subtests use
// fresh session ids and keys, so newStore may return the same store every time.
func Run(t *testing.T, newStore func(t *testing.T) session.Store) {
	runSessions(t, newStore)
	runEvents(t, newStore)
	runPush(t, newStore)
	runFleet(t, newStore)
	runQuotas(t, newStore)
}

// sample returns a new session in state of generation gen, with every kind of
// field set.
func sample(t *testing.T, state session.State, gen int) session.Session {
	t.Helper()
	id := newID(t)
	now := time.Now().UTC()
	s := session.Session{
		ID: id, ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "Hello",
		Features: session.Features{FileUpload: true, VoiceMic: true}, AppKeyID: "key-1", Tenant: "tenant-1",
		SessionType: "setup", ClientType: "automation", ConfigurationID: "cfg-1",
		State: state, Generation: gen, TokenHashes: []string{"hash-0"},
		TmuxSessionName: "ra-" + id[:8], CreatedAt: now, UpdatedAt: now,
		AgentType: "coder",
		Workspace: &registry.WorkspaceConfig{
			Enabled: true, RepoSource: registry.RepoSource{Type: registry.RepoFixed, URL: "https://example.com/org/repo.git", Branch: "main"},
			Tools: []string{"read", "grep"}, ResourceLimits: registry.ResourceLimits{CPU: "2", Memory: "4G", Disk: "40G"},
			SetupCommands: []string{"make"}, SetupTimeoutSeconds: 300, WarmPoolSize: 1,
		},
	}
	if state.Terminal() {
		s.Reason, s.EndedAt = session.ReasonError, now
	}
	return s
}

func create(t *testing.T, st session.Store, s session.Session) session.Session {
	t.Helper()
	if err := st.Create(t.Context(), s, nil); err != nil {
		t.Fatalf("create %s: %v", s.ID, err)
	}
	return s
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
