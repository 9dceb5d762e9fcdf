package remote

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// pushPlatform is platform with a push channel that accepts the sandbox's
// connection and pushes nothing; it counts the inbox reads made while the
// connection is up, and signals each heartbeat.
type pushPlatform struct {
	*platform
	mu        sync.Mutex
	up        bool
	readsUp   int
	heartbeat chan struct{}
}

func (p *pushPlatform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, "/sandbox/s1/") {
	case "/push":
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = c.CloseNow() }()
		p.mu.Lock()
		p.up = true
		p.mu.Unlock()
		for {
			if _, _, err := c.Read(context.Background()); err != nil {
				return
			}
		}
	case sandboxwire.RouteInbox:
		p.mu.Lock()
		if p.up {
			p.readsUp++
		}
		p.mu.Unlock()
	case sandboxwire.RouteHeartbeat:
		select {
		case p.heartbeat <- struct{}{}:
		default:
		}
	}
	p.platform.ServeHTTP(w, r)
}

// TestPushedSandboxDoesNotPoll: while its push connection is up a sandbox
// reads its inbox when pushed (and once on connecting), not every poll
// period: over 20 heartbeats, as often apart as the poll period, it reads
// its inbox at most twice (the read on connecting, and the one as it is
// ready, which may come after the connection), where polling would read it
// about 20 times.
func TestPushedSandboxDoesNotPoll(t *testing.T) {
	// The inbox never says stop: the read on connecting may come after the
	// message is answered.
	p := &pushPlatform{platform: &platform{noStop: true}, heartbeat: make(chan struct{})}
	srv := httptest.NewServer(p)
	defer srv.Close()
	ws := t.TempDir()
	c := Config{
		SessionID: "s1", Gateway: srv.URL, Token: "rsb_token", Workspace: ws, PushURL: "ws" + strings.TrimPrefix(srv.URL, "http") + "/push",
		Heartbeat: 5 * time.Millisecond, Poll: 5 * time.Millisecond, EnvFile: filepath.Join(ws, ".proliferate_env.json"),
		LLM: agentconfig.LLM{Provider: "scripted"}, ContextWindow: 1000,
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	for range 20 {
		select {
		case <-p.heartbeat:
		case err := <-done:
			t.Fatalf("Run ended (%v) though nothing told it to stop", err)
		case <-ctx.Done():
			t.Fatal("no heartbeat")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Logf("Run after the cancel: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.up {
		t.Fatal("the sandbox never connected its push channel")
	}
	if p.readsUp > 2 {
		t.Errorf("%d inbox reads with the push connection up and nothing pushed; want at most 2 (as it is ready, on connecting)", p.readsUp)
	}
}
