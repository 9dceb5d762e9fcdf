package systemtest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// TestDayCapHoldsAtTheGateway: with a 0.05 USD day cap, three agents whose
// model (a server speaking Anthropic's wire format) reports 1,000 tokens in
// and out a call (0.018 USD at claude-sonnet-4's prices) spend up to the cap
// and past it by less than one call; then every agent that calls again is
// refused without its call reaching the model, is told (budget.exceeded),
// and ends with reason budget; the app's creates are 429 budget_exceeded.
func TestDayCapHoldsAtTheGateway(t *testing.T) {
	t.Parallel()
	var upstream atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n := upstream.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_%d","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Answer %d."}],"stop_reason":"end_turn","usage":{"input_tokens":1000,"output_tokens":1000}}`, n, n)
	}))
	t.Cleanup(up.Close)
	const callUSD, capUSD = 0.018, 0.05
	s := start(t, withModels(map[string]string{"anthropic": up.URL}, nil), withConfig(func(c *config.RemoteAgents) {
		c.SessionLimits.MaxCostUSDPerDay = capUSD
	}), func(o *devserver.Options) {
		o.SandboxEnv = []string{"RA_LLM_PROVIDER=anthropic", "RA_NO_TMUX=1"}
	})
	type agent struct{ id, tok string }
	var agents []agent
	for range 3 {
		id, tok := s.mustCreate()
		agents = append(agents, agent{id, tok})
	}
	tenant := appTenant(t, s)
	usage := func() map[string]any {
		r := s.call(http.MethodGet, "/api/v1/usage", appKey, nil)
		if r.status != http.StatusOK {
			t.Fatalf("usage: %d %s", r.status, r.raw)
		}
		return r.body
	}
	if live, _ := usage()["live_agents"].(map[string]any); live["count"] != float64(3) || live["quota"] != float64(100) {
		t.Errorf("usage with three agents: %v", live)
	}
	spent := func() float64 {
		sp, err := s.srv.Env.SessionStore().TenantSpend(t.Context(), tenant, session.ScopeTenantDay, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return float64(sp.MicroUSD) / 1e6
	}
	told := func(id string) bool {
		evs, _ := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 200)
		for _, e := range evs {
			if e.Type == sandboxwire.TypeBudgetExceeded {
				return e.Data["scope"] == session.ScopeTenantDay && e.Data["limit"] == capUSD
			}
		}
		return false
	}
	// Each agent answers its first message, then is asked again until the
	// gateway refuses it.
	for i := 0; ; i++ {
		all := true
		for _, a := range agents {
			if told(a.id) {
				continue
			}
			all = false
			if r := s.call(http.MethodPost, "/api/remote_agents/"+a.id+"/messages", a.tok, map[string]any{"text": fmt.Sprintf("Spend %d.", i)}); r.status != http.StatusOK && r.status != http.StatusAccepted {
				t.Logf("message to %s: %d %s", a.id, r.status, r.raw)
			}
		}
		if all {
			break
		}
		if i > 50 {
			t.Fatalf("after %d rounds of messages, spend %.3f USD, %d model calls: not every agent was told", i, spent(), upstream.Load())
		}
		before := upstream.Load()
		eventually(t, 30*time.Second, "the round's calls answered or refused", func() bool {
			if upstream.Load() > before {
				return true
			}
			for _, a := range agents {
				if !told(a.id) {
					return false
				}
			}
			return true
		})
	}
	calls := upstream.Load()
	got := spent()
	t.Logf("the app spent %.4f USD in %d model calls under a %.2f USD cap", got, calls, capUSD)
	if got < capUSD || got >= capUSD+callUSD {
		t.Errorf("the app spent %.4f USD in %d calls; want the cap, %.2f, passed by less than one call (%.3f)", got, calls, capUSD, callUSD)
	}
	for _, a := range agents {
		if r := s.endsWith(t, a.id, 60*time.Second); r != session.ReasonBudget {
			t.Errorf("agent %s ended %q, want budget", a.id, r)
		}
	}
	if n := upstream.Load(); n != calls {
		t.Errorf("%d model calls reached the model after the cap, want none", n-calls)
	}
	wantError(t, s.create(createBody("Hello")), http.StatusTooManyRequests, "budget_exceeded")
	u := usage()
	spend, _ := u["spend"].(map[string]any)
	day, _ := spend["day"].(map[string]any)
	month, _ := spend["month"].(map[string]any)
	if day["spent_usd"] != got || day["cap_usd"] != capUSD || day["remaining_usd"] != float64(0) || day["held_usd"] != float64(0) || month["spent_usd"] != got || month["cap_usd"] != nil {
		t.Errorf("usage after the cap: %v", spend)
	}
	if live, _ := u["live_agents"].(map[string]any); live["count"] != float64(0) {
		t.Errorf("usage once every agent ended: %v", live)
	}
	// The 100% alarm's metric: the app's fullest cap, after each call.
	top := 0.0
	for _, line := range strings.Split(s.logs.String(), "\n") {
		var m struct {
			Used *float64 `json:"BudgetUsedPercent"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Used != nil {
			top = max(top, *m.Used)
		}
	}
	if want := 100 * got / capUSD; top < 100 || top > want+0.01 {
		t.Errorf("BudgetUsedPercent reached %.1f, want %.1f", top, want)
	}
	if r := s.call(http.MethodGet, "/api/v1/usage", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("usage without an app key: %d %s", r.status, r.raw)
	}
}
