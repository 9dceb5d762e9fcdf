package systemtest_test

import (
	"net/http"
	"testing"

	"github.com/remote-agents/remote-agents/shared/config"
)

// TestAppSetsItsOwnLimits: an app narrows its key's limits with PUT
// /api/v1/limits, validated; GET and the usage answer them with the
// platform's, the lower holding; the sessions it creates from then on keep
// the key's caps.
func TestAppSetsItsOwnLimits(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"), withConfig(func(c *config.RemoteAgents) {
		c.SessionLimits.MaxCostUSDPerDay = 2
		c.SessionLimits.MaxTokens = 5000
	}))
	for _, bad := range []any{
		map[string]any{"max_cost_usd_per_day": -1},
		// Past what a cap can mean (and what DynamoDB stores: 1e126 and up).
		map[string]any{"max_cost_usd_per_day": 1e308},
		map[string]any{"max_cost_usd_per_month": 1e9 + 1},
		map[string]any{"session_limits": map[string]any{"max_cost_usd": 1e200}},
		map[string]any{"session_limits": map[string]any{"max_session_seconds": 40 * 24 * 3600}},
		map[string]any{"max_cost_usd_per_week": 1},
		"[]",
	} {
		wantError(t, s.call(http.MethodPut, "/api/v1/limits", appKey, bad), http.StatusBadRequest, "invalid_request")
	}
	r := s.call(http.MethodPut, "/api/v1/limits", appKey, map[string]any{"max_cost_usd_per_day": 5, "max_cost_usd_per_month": 20, "session_limits": map[string]any{"max_tokens": 1000}})
	if r.status != http.StatusOK {
		t.Fatalf("put limits: %d %s", r.status, r.raw)
	}
	eff, _ := r.body["effective"].(map[string]any)
	own, _ := r.body["app_key"].(map[string]any)
	sl, _ := eff["session_limits"].(map[string]any)
	if own["max_cost_usd_per_day"] != float64(5) || eff["max_cost_usd_per_day"] != float64(2) || eff["max_cost_usd_per_month"] != float64(20) || sl["max_tokens"] != float64(1000) {
		t.Errorf("limits after the put: %s", r.raw)
	}
	if g := s.call(http.MethodGet, "/api/v1/limits", appKey, nil); g.status != http.StatusOK || g.raw != r.raw {
		t.Errorf("get limits: %d %s, want what the put answered", g.status, g.raw)
	}
	u := s.call(http.MethodGet, "/api/v1/usage", appKey, nil)
	spend, _ := u.body["spend"].(map[string]any)
	day, _ := spend["day"].(map[string]any)
	month, _ := spend["month"].(map[string]any)
	if day["cap_usd"] != float64(2) || month["cap_usd"] != float64(20) {
		t.Errorf("usage caps: %s", u.raw)
	}
	id, _ := s.mustCreate()
	sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil || sess.AppCaps == nil || sess.AppCaps.PerDayUSD != 5 || sess.AppCaps.PerMonthUSD != 20 || sess.AppLimits == nil || sess.AppLimits.MaxTokens != 1000 {
		t.Errorf("a session created after the put: caps %+v, limits %+v (%v)", sess.AppCaps, sess.AppLimits, err)
	}
	wantError(t, s.call(http.MethodPut, "/api/v1/limits", "", map[string]any{}), http.StatusUnauthorized, "missing_token")
}
