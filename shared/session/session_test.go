package session_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/jobs"
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

type publisher struct{ sent []jobs.Message }

func (p *publisher) Publish(_ context.Context, m jobs.Message, _ time.Duration) error {
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
		HeartbeatAt: now.Add(-2 * time.Minute), GuardrailsHash: guardrails.Hash([]byte("# rules\n")),
	}, nil); err != nil {
		t.Fatal(err)
	}
	pub := &publisher{}
	svc := session.NewService(session.Options{Store: store, Guardrails: g, Jobs: pub, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	if len(pub.sent) != 1 || pub.sent[0].Type != jobs.SessionStop || pub.sent[0].SessionID != id {
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
	svc := session.NewService(session.Options{Store: store, Guardrails: guardrails.File(t.TempDir() + "/none.md"), Jobs: &publisher{},
		Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
		if err := store.Create(t.Context(), session.Session{ID: id, State: tt.state, Generation: 1, TokenHashes: []string{hash}, HeartbeatAt: now}, nil); err != nil {
			t.Fatal(err)
		}
		st, err := svc.Alive(t.Context(), id, tok)
		if err != nil || st.Alive != tt.alive || st.State != string(tt.state) {
			t.Errorf("%s: %+v %v, want alive %v", tt.state, st, err, tt.alive)
		}
	}
}
