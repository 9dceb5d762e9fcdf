package fleetapi_test

// The fuzz target of the fleet list's query decoding: any query reaches the
// real handler over a store that records the filter it is asked for and then
// fails as an outage would. So a query the route finds invalid is answered 400
// invalid_request and reaches nothing; one it accepts reaches the store, with
// exactly the filter the query says, and is answered 503.

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/fleet"
	"github.com/remote-agents/remote-agents/shared/fleetapi"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/httpapi/httpapitest"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/session"
)

// store records the list filter that reaches it, then fails as an outage.
type store struct {
	fleet.Store // only ListByTenant is called by a list
	reached     bool
	listed      *session.ListFilter
}

func (s *store) ListByTenant(_ context.Context, _ string, filter session.ListFilter, _ int, _ string) ([]session.Session, string, error) {
	s.reached, s.listed = true, &filter
	return nil, "", apierror.Unavailable(errors.New("fuzz: not reached in this test"))
}

// keys knows every app key, as tenant "tenant"'s.
type keys struct{}

func (keys) AppKeyByHash(context.Context, string) (registry.AppKey, error) {
	return registry.AppKey{ID: "key", Tenant: "tenant"}, nil
}

// GET /api/remote_agents?…: any three query parameters.
func FuzzList(f *testing.F) {
	f.Add("project_name", "p", "state", "working,idle", "limit", "10")
	f.Add("alive", "true", "persona_slug", "dev", "cursor", "abc")
	f.Add("alive", "true", "state", "ended", "agent_type", "t")
	f.Add("alive", "false", "persona_slug", "dev", "limit", "5")
	f.Add("limit", "0", "state", "asleep", "other", "x")
	f.Add("cursor", strings.Repeat("c", 1025), "", "", "", "")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3 string) {
		st := &store{}
		svc := fleet.New(fleet.Options{Store: st, Keys: keys{}, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }})
		h := fleetapi.New(svc, nil, slog.New(slog.DiscardHandler))
		params := map[string]string{k1: v1, k2: v2, k3: v3}
		req := httpapi.Request{Headers: map[string]string{"authorization": "Bearer rak_key"}, QueryStringParameters: params}
		res, err := h.List(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		env := httpapitest.Envelope(t, res, 400, 503)
		if (res.StatusCode == 503) != st.reached {
			t.Fatalf("answered %+v; reached the store: %v", env, st.reached)
		}
		if !st.reached {
			return
		}
		l := st.listed
		if l.ProjectName != params["project_name"] || l.PersonaSlug != params["persona_slug"] || l.AgentType != params["agent_type"] {
			t.Fatalf("listed %+v for %v", l, params)
		}
		for name, v := range params {
			if !slices.Contains([]string{"project_name", "persona_slug", "agent_type", "state", "alive", "limit", "cursor"}, name) || len(v) > 1024 {
				t.Fatalf("accepted %q=%d bytes", name, len(v))
			}
		}
		var want []session.State
		switch params["alive"] {
		case "true":
			want = session.Live
		case "false":
			want = []session.State{session.Ended, session.Failed}
		}
		if s := params["state"]; s != "" {
			for st := range strings.SplitSeq(s, ",") {
				want = append(want, session.State(st))
			}
		}
		if !slices.Equal(l.States, want) {
			t.Fatalf("listed states %v for %v", l.States, params)
		}
	})
}
