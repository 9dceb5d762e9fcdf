package systemtest_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/queueworker"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
)

// diesAfterLaunch starts the sandbox for real, then fails as a worker that died
// before recording it would: its context ends (a Lambda timing out), so it
// retries nothing on the fallback either.
type diesAfterLaunch struct {
	launch.Launcher
	ref string
	die context.CancelFunc
}

func (l *diesAfterLaunch) Launch(ctx context.Context, spec launch.Spec) (string, error) {
	ref, err := l.Launcher.Launch(ctx, spec)
	if err != nil {
		return "", err
	}
	l.ref = ref
	l.die()
	return "", errors.New("the worker died after starting the sandbox")
}

// heldGateway forwards to the gateway at target once released.
func heldGateway(t *testing.T, target string) (gatewayURL string, release func()) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	released := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-released:
			proxy.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() { close(released) }
}

// A launch whose worker died after starting the sandbox, before recording it,
// is taken over once its lease ran out, by the next generation with a new
// token: the session becomes ready with the sandbox that runs. (Taking it over
// in the same generation minted a new token while the launcher answered with
// the sandbox already running, which held the old one: never ready.)
func TestLaunchTakenOverAfterALostClaimBecomesReady(t *testing.T) {
	t.Parallel()
	// Two generations of one session on one machine would share its tmux
	// socket; each Fargate task has its own.
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	store := s.srv.Env.SessionStore()
	id := uuid.NewString()
	now := time.Now().UTC()
	_, sessionHash := token.New(token.Session)
	if err := store.Create(t.Context(), session.Session{
		ID: id, Blueprint: session.Blueprint{
			ProjectName:     "demo",
			PersonaSlug:     "assistant",
			InitialPrompt:   "Hello",
			TmuxSessionName: "ra-" + id[:8],
		},
		State:      session.Provisioning,
		Generation: 1, TokenHashes: []string{sessionHash}, CreatedAt: now, UpdatedAt: now,
	}, nil); err != nil {
		t.Fatal(err)
	}
	worker := queueworker.Worker{Store: store, Launcher: s.srv.Launcher, GatewayURL: s.srv.URL, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	msg := jobqueue.Message{Type: jobqueue.SessionStart, SessionID: id, Generation: 1}

	// The first worker's claim ran out long ago (its clock), and its sandbox
	// reaches the gateway only once the claim was taken over.
	gateway, release := heldGateway(t, s.srv.URL)
	dying, die := context.WithCancel(t.Context())
	lost := &diesAfterLaunch{Launcher: s.srv.Launcher, die: die}
	died := worker
	died.Launcher, died.GatewayURL = lost, gateway
	died.Now = func() time.Time { return time.Now().Add(-queueworker.LaunchLease - time.Minute) }
	if err := died.Do(dying, msg); err == nil || lost.ref == "" {
		t.Fatalf("the first launch: %v, sandbox %q; want a sandbox started and the worker failed", err, lost.ref)
	}
	// The message comes back.
	if err := worker.Do(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	release()

	var got session.Session
	eventually(t, 20*time.Second, "session out of provisioning", func() bool {
		var err error
		got, err = store.Get(t.Context(), id)
		return err == nil && got.State != session.Provisioning
	})
	if !slices.Contains(session.Running, got.State) || got.ReadyAt.IsZero() || got.Generation != 2 || got.SandboxRef == lost.ref || !slices.Contains(s.srv.Launcher.Running(), got.SandboxRef) {
		t.Fatalf("session %s (%s), generation %d, sandbox %q (running: %v); want it ready with the running sandbox of generation 2, not %q",
			got.State, got.Reason, got.Generation, got.SandboxRef, s.srv.Launcher.Running(), lost.ref)
	}
	// The lost claim's sandbox holds a token that no longer works: it stops.
	eventually(t, 20*time.Second, "the lost claim's sandbox stopped", func() bool {
		return !slices.Contains(s.srv.Launcher.Running(), lost.ref)
	})
}
