package systemtest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/config"
)

// TestQuotasAnswer429: an app at its live agents quota gets 429
// quota_exceeded on create until one of its agents is over; an agent at its
// open streams quota gets 429 for one more stream until one closes.
func TestQuotasAnswer429(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"), withConfig(func(c *config.RemoteAgents) {
		c.Quotas = config.Quotas{ConcurrentSessions: 2, CreatesPerMinute: 100, StreamsPerSession: 2}
	}))
	a, aTok := s.mustCreate()
	b, bTok := s.mustCreate()
	over := s.create(createBody("Hello"))
	wantError(t, over, http.StatusTooManyRequests, "quota_exceeded")
	if d, _ := over.body["details"].(map[string]any); d["quota"] != "concurrent_sessions" || over.body["retry_after_seconds"] != float64(30) || over.headers.Get("Retry-After") != "30" {
		t.Errorf("over the live quota: %s %v", over.raw, over.headers)
	}
	if r := s.shutdown(a, aTok); r.status != http.StatusOK {
		t.Fatalf("shutdown: %d %s", r.status, r.raw)
	}
	eventually(t, 30*time.Second, "a create once an agent is over", func() bool {
		return s.create(createBody("Hello")).status == http.StatusOK
	})

	first, second := s.openSSE(t, b, bTok, 0, ""), s.openSSE(t, b, bTok, 0, "")
	if first.status != http.StatusOK || second.status != http.StatusOK {
		t.Fatalf("two streams: %d %d", first.status, second.status)
	}
	third := s.call(http.MethodGet, "/api/remote_agents/"+b+"/events", bTok, nil)
	wantError(t, third, http.StatusTooManyRequests, "quota_exceeded")
	if d, _ := third.body["details"].(map[string]any); d["quota"] != "streams_per_session" {
		t.Errorf("over the streams quota: %s", third.raw)
	}
	first.cancel()
	eventually(t, 15*time.Second, "a stream once one closed", func() bool {
		st := s.openSSE(t, b, bTok, 0, "")
		defer st.cancel()
		return st.status == http.StatusOK
	})
}
