package session_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
	"github.com/remote-agents/remote-agents/shared/token"
)

func TestLost(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	tests := []struct {
		name string
		s    session.Session
		lost bool
	}{
		{"fresh heartbeat", session.Session{State: session.Ready, HeartbeatAt: ago(10 * time.Second)}, false},
		{"stale heartbeat", session.Session{State: session.Working, HeartbeatAt: ago(61 * time.Second)}, true},
		{"ready, never beat, long ago", session.Session{State: session.Idle, ReadyAt: ago(5 * time.Minute)}, true},
		{"provisioning is never lost", session.Session{State: session.Provisioning, HeartbeatAt: ago(time.Hour)}, false},
		{"ended is not lost", session.Session{State: session.Ended, HeartbeatAt: ago(time.Hour)}, false},
	}
	for _, tt := range tests {
		if got := tt.s.Lost(now); got != tt.lost {
			t.Errorf("%s: Lost = %v", tt.name, got)
		}
	}
}

type publisher struct{ sent []jobqueue.Message }

// newControl is a Control over store, with guardrails that are not there,
// a publisher that keeps what it is sent, and now as its clock (nil: the
// time).
func newControl(t *testing.T, store session.Store, now func() time.Time) *session.Control {
	t.Helper()
	return session.NewControl(session.ControlOptions{Store: store, Guardrails: guardrails.File(t.TempDir() + "/none.md"), Jobs: &publisher{},
		Now: now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func (p *publisher) Publish(_ context.Context, m jobqueue.Message, _ time.Duration) error {
	p.sent = append(p.sent, m)
	return nil
}

func TestAliveMarksSilentSandboxLost(t *testing.T) {
	t.Parallel()
	now := time.Now()
	dir := t.TempDir()
	g := guardrails.File(dir + "/g.md")
	if err := os.WriteFile(string(g), []byte("# rules\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, hash := token.New(token.Session)
	id := "0b7d4b8e-8c1e-4a55-9d7f-1f2e3d4c5b6a"
	store := storetest.NewMemory()
	if err := store.Create(t.Context(), session.Session{
		ID: id, State: session.Ready, Generation: 1, TokenHashes: []string{hash},
		HeartbeatAt: now.Add(-2 * time.Minute), Blueprint: session.Blueprint{
			GuardrailsHash: guardrails.Hash([]byte("# rules\n")),
		},
	}, nil); err != nil {
		t.Fatal(err)
	}
	pub := &publisher{}
	svc := session.NewControl(session.ControlOptions{Store: store, Guardrails: g, Jobs: pub, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	st, err := svc.Alive(t.Context(), id, tok)
	if err != nil {
		t.Fatal(err)
	}
	if st.Alive || st.State != "ended" || st.GuardrailsStale {
		t.Errorf("alive of a silent sandbox: %+v", st)
	}
	if got, _ := store.Get(t.Context(), id); got.Reason != session.ReasonLost {
		t.Errorf("session after: %+v", got)
	}
	if len(pub.sent) != 1 || pub.sent[0].Type != jobqueue.SessionStop || pub.sent[0].SessionID != id {
		t.Errorf("published %+v, want one session.stop for the lost sandbox", pub.sent)
	}
}

// TestAliveIsNotEnded: an agent is alive while it is not ended (remote-agents
// spec, "still active (not ended)"): provisioning and ending included, with the
// state telling which; ended and failed are not.
func TestAliveIsNotEnded(t *testing.T) {
	t.Parallel()
	now := time.Now()
	store := storetest.NewMemory()
	svc := newControl(t, store, func() time.Time { return now })
	for i, tt := range []struct {
		state session.State
		alive bool
	}{
		{session.Provisioning, true},
		{session.Ready, true},
		{session.Working, true},
		{session.Idle, true},
		{session.Ending, true},
		{session.Ended, false},
		{session.Failed, false},
	} {
		tok, hash := token.New(token.Session)
		id := fmt.Sprintf("0b7d4b8e-8c1e-4a55-9d7f-1f2e3d4c5b%02d", i)
		s := session.Session{ID: id, State: tt.state, Generation: 1, TokenHashes: []string{hash}, HeartbeatAt: now}
		if tt.state.Terminal() {
			s.EndedAt = now
		}
		if err := store.Create(t.Context(), s, nil); err != nil {
			t.Fatal(err)
		}
		st, err := svc.Alive(t.Context(), id, tok)
		if err != nil || st.Alive != tt.alive || st.State != string(tt.state) {
			t.Errorf("%s: %+v %v, want alive %v", tt.state, st, err, tt.alive)
		}
	}
}

// TestAliveShowsUsage: alive reports the tokens the gateway metered for the
// session, ended or not.
func TestAliveShowsUsage(t *testing.T) {
	t.Parallel()
	store := storetest.NewMemory()
	svc := newControl(t, store, nil)
	tok, hash := token.New(token.Session)
	id := "0b7d4b8e-8c1e-4a55-9d7f-1f2e3d4c5bff"
	if err := store.Create(t.Context(), session.Session{ID: id, State: session.Ready, Generation: 1, TokenHashes: []string{hash}, HeartbeatAt: time.Now()}, nil); err != nil {
		t.Fatal(err)
	}
	if st, err := svc.Alive(t.Context(), id, tok); err != nil || st.Usage != (session.Usage{}) {
		t.Errorf("alive before any call: %+v, %v", st, err)
	}
	for range 2 {
		if err := store.AddUsage(t.Context(), id, session.Usage{InputTokens: 12, OutputTokens: 4, CachedTokens: 2, Calls: 1}); err != nil {
			t.Fatal(err)
		}
	}
	want := session.Usage{InputTokens: 24, OutputTokens: 8, CachedTokens: 4, Calls: 2}
	if st, err := svc.Alive(t.Context(), id, tok); err != nil || st.Usage != want {
		t.Errorf("alive: %+v, %v; want usage %+v", st, err, want)
	}
}

// TestSessionTokensEndAfterTheGrace: a session token works until its session
// has been ended for TokenGrace (a viewer reads the final events meanwhile),
// then every route refuses it with invalid_token.
func TestSessionTokensEndAfterTheGrace(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	now := created
	store := storetest.NewMemory()
	store.Now = func() time.Time { return now }
	svc := newControl(t, store, func() time.Time { return now })
	tok, hash := token.New(token.Session)
	id := "0b7d4b8e-8c1e-4a55-9d7f-1f2e3d4c5b6a"
	if err := store.Create(t.Context(), session.Session{ID: id, State: session.Idle, Generation: 1, TokenHashes: []string{hash}, HeartbeatAt: now, CreatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	routes := map[string]func() error{
		"alive":     func() error { _, err := svc.Alive(t.Context(), id, tok); return err },
		"authorize": func() error { _, err := svc.Authorize(t.Context(), id, tok); return err }, // events, embed, messages, attachments, env
		"shutdown":  func() error { _, err := svc.Shutdown(t.Context(), id, tok); return err },
	}
	check := func(when string, want apierror.Code) {
		t.Helper()
		for name, call := range routes {
			if err := call(); apierror.CodeOf(err) != want {
				t.Errorf("%s %s: %v, want %q", name, when, err, want)
			}
		}
	}
	// A live session's token has no age limit.
	now = created.Add(30 * 24 * time.Hour)
	heartbeat(t, store, id, now)
	for name, call := range routes {
		if name == "shutdown" {
			continue
		}
		if err := call(); err != nil {
			t.Errorf("%s of a live session a month on: %v", name, err)
		}
	}
	if _, err := store.Transition(t.Context(), id, session.Change{From: session.Live, To: session.Ended, Reason: session.ReasonIdle}); err != nil {
		t.Fatal(err)
	}
	ended := now
	now = ended.Add(session.TokenGrace)
	check("within the grace", "")
	if st, err := svc.Alive(t.Context(), id, tok); err != nil || st.Alive {
		t.Errorf("alive within the grace: %+v %v, want alive false", st, err)
	}
	now = ended.Add(session.TokenGrace + time.Second)
	check("after the grace", apierror.InvalidToken)
}

// heartbeat records a heartbeat at now, so that the session is not lost.
func heartbeat(t *testing.T, store session.Store, id string, now time.Time) {
	t.Helper()
	got, err := store.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Touch(t.Context(), id, got.Generation, session.Fields{HeartbeatAt: now}); err != nil {
		t.Fatal(err)
	}
}

// The workspace spec's words for the states: provisioning, then active.
func TestStatusOf(t *testing.T) {
	t.Parallel()
	for state, want := range map[session.State]string{
		session.Provisioning: "provisioning", session.Ready: "active", session.Working: "active", session.Idle: "active",
		session.Ending: "ending", session.Ended: "ended", session.Failed: "ended",
	} {
		if got := session.StatusOf(state); got != want {
			t.Errorf("StatusOf(%s) = %q, want %q", state, got, want)
		}
	}
}

// TestAliveShowsADroppedWorkspaceDegraded: a sandbox launched without its
// workspace (its launches with it failed) is degraded, saying why, whatever
// its sandbox reported (no workspace, as it was served none).
func TestAliveShowsADroppedWorkspaceDegraded(t *testing.T) {
	t.Parallel()
	now := time.Now()
	store := storetest.NewMemory()
	svc := newControl(t, store, func() time.Time { return now })
	tok, hash := token.New(token.Session)
	const id = "0b7d4b8e-8c1e-4a55-9d7f-1f2e3d4c5baa"
	const why = "the sandbox could not be launched with its workspace (CannotPullContainerError)"
	s := session.Session{ID: id, State: session.Idle, Generation: 1, TokenHashes: []string{hash}, HeartbeatAt: now, ReadyAt: now,
		Blueprint:        session.Blueprint{Workspace: &registry.WorkspaceConfig{Enabled: true}},
		WorkspaceDropped: why, WorkspaceStatus: &sandboxwire.WorkspaceStatus{Status: sandboxwire.WorkspaceNone, Warnings: []string{}}}
	if err := store.Create(t.Context(), s, nil); err != nil {
		t.Fatal(err)
	}
	st, err := svc.Alive(t.Context(), id, tok)
	if err != nil || st.Workspace == nil || st.Workspace.Status != sandboxwire.WorkspaceDegraded || len(st.Workspace.Warnings) != 1 || st.Workspace.Warnings[0] != why {
		t.Errorf("alive: %+v %v, want the workspace degraded, saying why", st.Workspace, err)
	}
}

// An id no agent could have is not found without being quoted back (it
// may be as long as the request allows); a well-formed unknown one is
// named.
func TestAuthorizeQuotesOnlyWellFormedIDs(t *testing.T) {
	t.Parallel()
	st := storetest.NewMemory()
	long := strings.Repeat("x", 100_000)
	_, err := session.Authorize(t.Context(), st, long, "ras_token", time.Now())
	var e *apierror.Error
	if !errors.As(err, &e) || e.Code != apierror.AgentNotFound || len(e.Message) > 100 {
		t.Errorf("a 100 KB id: %v", err)
	}
	id := "6c7fba59-def2-4633-97c2-bac8f0d8d18f"
	if _, err := session.Authorize(t.Context(), st, id, "ras_token", time.Now()); !errors.As(err, &e) || e.Code != apierror.AgentNotFound || !strings.Contains(e.Message, id) {
		t.Errorf("an unknown id: %v", err)
	}
}
