package systemtest_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/session"
)

// limitedType creates the agent type id whose sessions have limits.
func (s *stack) limitedType(t *testing.T, id string, limits map[string]any) {
	t.Helper()
	ws := map[string]any{"enabled": true, "repo_source": map[string]any{"type": "none"}, "session_limits": limits}
	if r := s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": id, "name": id, "workspace_config": ws}); r.status != http.StatusCreated {
		t.Fatalf("create type: %d %s", r.status, r.raw)
	}
}

// endsWith waits until session id is over and returns its reason.
func (s *stack) endsWith(t *testing.T, id string, within time.Duration) session.Reason {
	t.Helper()
	var got session.Session
	eventually(t, within, "the session over", func() bool {
		var err error
		got, err = s.srv.Env.SessionStore().Get(t.Context(), id)
		return err == nil && got.State.Terminal()
	})
	return got.Reason
}

// TestSessionLimitsEndSessions: each limit ends a session with its reason
// (small limits, the scripted model, heartbeats every second): its type's
// token budget (the tokens the model gateway metered), its type's maximum time, the platform's idle timeout; alive
// shows what remains.
func TestSessionLimitsEndSessions(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1", "RA_HEARTBEAT_SECONDS=1"), withConfig(func(c *config.RemoteAgents) {
		c.SessionLimits = config.SessionLimits{MaxSessionSeconds: 3600, IdleTimeoutSeconds: 3}
	}))
	s.limitedType(t, "tokens", map[string]any{"max_tokens": 10})
	s.limitedType(t, "short", map[string]any{"max_session_seconds": 2, "idle_timeout_seconds": 600})
	s.limitedType(t, "costly", map[string]any{"max_cost_usd": 0.01})
	for _, c := range []struct {
		typ  string
		want session.Reason
	}{{"tokens", session.ReasonTokenBudget}, {"costly", session.ReasonCostBudget}, {"short", session.ReasonMaxDuration}, {"", session.ReasonIdleTimeout}} {
		body := createBody("Hello")
		if c.typ != "" {
			body["agent_type"] = c.typ
		}
		r := s.create(body)
		if r.status != http.StatusOK {
			t.Fatalf("%s: create: %d %s", c.typ, r.status, r.raw)
		}
		id := r.str("agent_id")
		// What the model gateway meters and costs (the scripted model calls
		// none): 12 tokens; 0.02 USD.
		switch c.typ {
		case "tokens":
			if err := s.srv.Env.SessionStore().AddUsage(t.Context(), id, session.Usage{InputTokens: 8, OutputTokens: 4, Calls: 1}); err != nil {
				t.Fatal(err)
			}
		case "costly":
			if err := s.srv.Env.SessionStore().AddUsage(t.Context(), id, session.Usage{InputTokens: 1, Calls: 1, CostMicroUSD: 20000}); err != nil {
				t.Fatal(err)
			}
		}
		if c.typ == "" {
			a := s.alive(id, r.str("session_token"))
			rem, _ := a.body["remaining"].(map[string]any)
			lim, _ := a.body["limits"].(map[string]any)
			if lim["idle_timeout_seconds"] != float64(3) || rem["idle_seconds"] == nil || rem["tokens"] != nil {
				t.Errorf("alive limits %v remaining %v", lim, rem)
			}
		}
		if got := s.endsWith(t, id, 30*time.Second); got != c.want {
			t.Errorf("%s: ended with %q, want %q", c.typ, got, c.want)
		}
	}
	// Each end is a metrics line in the log (embedded metric format), the
	// one at its maximum time counted as such.
	logs := s.logs.String()
	if !strings.Contains(logs, `"SessionTokens":12`) || !strings.Contains(logs, `"SessionsAtMaxDuration":1`) || !strings.Contains(logs, `"Namespace":"RemoteAgents"`) {
		t.Errorf("no metrics lines for the ended sessions in the log")
	}
}

// TestALongToolRunIsNotIdle: an agent running a tool longer than the idle
// timeout is at work, not idle (its heartbeats say busy): the tool's result
// is appended while the session is live; once it is done and idle, the
// session ends with idle_timeout.
func TestALongToolRunIsNotIdle(t *testing.T) {
	t.Parallel()
	call, _ := json.Marshal(map[string]any{"name": "bash", "args": map[string]any{"command": "sleep 6; echo done"}})
	script := filepath.Join(t.TempDir(), "script.jsonl")
	if err := os.WriteFile(script, []byte(`{"text":"working","tool_calls":[`+string(call)+`]}`+"\n"+`{"text":"Finished."}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, withSandboxEnv("RA_NO_TMUX=1", "RA_HEARTBEAT_SECONDS=1", "RA_LLM_SCRIPT="+script), withConfig(func(c *config.RemoteAgents) {
		c.SessionLimits = config.SessionLimits{IdleTimeoutSeconds: 3}
	}))
	id, _ := s.mustCreate()
	got := s.endsWith(t, id, 60*time.Second)
	all, err := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	finished := false
	for _, e := range all {
		if e.Type == "tool.call" {
			finished = true // appended: the session was live when the tool ended
		}
	}
	if !finished || got != session.ReasonIdleTimeout {
		t.Errorf("tool finished %v, ended with %q (want idle_timeout after it)", finished, got)
	}
}

// TestDailyBudgetRefusesCreates: an app whose model calls cost its daily
// budget today gets 429 budget_exceeded on create, with the seconds to the
// next UTC day; another app is not affected.
func TestDailyBudgetRefusesCreates(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox(), withConfig(func(c *config.RemoteAgents) {
		c.SessionLimits = config.SessionLimits{MaxCostUSDPerDay: 1}
		c.CreationTimeout = time.Second
	}))
	now := time.Now().UTC()
	// What the model gateway adds up for the app's calls.
	if err := s.srv.Env.SessionStore().AddSpend(t.Context(), appTenant(t, s), now.Truncate(24*time.Hour), 1_000_000); err != nil {
		t.Fatal(err)
	}
	r := s.create(createBody("Hello"))
	wantError(t, r, http.StatusTooManyRequests, "budget_exceeded")
	retry, _ := r.body["retry_after_seconds"].(float64)
	if d, _ := r.body["details"].(map[string]any); d["spent_usd"] != float64(1) || retry < 1 || retry > 86400 {
		t.Errorf("over the daily budget: %s", r.raw)
	}
}
