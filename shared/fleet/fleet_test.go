package fleet_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/fleet"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
	"github.com/remote-agents/remote-agents/shared/token"
)

// keys holds app keys by the hash of their secret.
type keys map[string]registry.AppKey

func (k keys) AppKeyByHash(_ context.Context, hash string) (registry.AppKey, error) {
	key, ok := k[hash]
	if !ok {
		return registry.AppKey{}, registry.ErrNotFound
	}
	return key, nil
}

// stop is a queued message and its delay.
type stop struct {
	m     jobqueue.Message
	delay time.Duration
}

type publisher struct{ sent []stop }

func (p *publisher) Publish(_ context.Context, m jobqueue.Message, delay time.Duration) error {
	p.sent = append(p.sent, stop{m, delay})
	return nil
}

// world is a fleet over the in-memory store with an app key of tenant acme
// and one of tenant other.
type world struct {
	svc         *fleet.Service
	store       *storetest.Memory
	jobs        *publisher
	acme, other string
	now         time.Time
}

func newWorld(t *testing.T) *world {
	t.Helper()
	acme, acmeHash := token.New(token.AppKey)
	other, otherHash := token.New(token.AppKey)
	w := &world{store: storetest.NewMemory(), jobs: &publisher{}, acme: acme, other: other, now: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	w.svc = fleet.New(fleet.Options{
		Store: w.store,
		Keys:  keys{acmeHash: {ID: "k1", Tenant: "acme"}, otherHash: {ID: "k2", Tenant: "other"}},
		Jobs:  w.jobs,
		Log:   slog.New(slog.DiscardHandler),
		Now:   func() time.Time { return w.now },
	})
	return w
}

// add writes a session of tenant in state, created age before now, and
// returns it with its session token.
func (w *world) add(t *testing.T, id, tenant string, state session.State, age time.Duration) (session.Session, string) {
	t.Helper()
	tok, hash := token.New(token.Session)
	s := session.Session{ID: id, Tenant: tenant, Blueprint: session.Blueprint{
		PersonaSlug: "dev",
		ProjectName: "p",
	},
		State: state, Generation: 1,
		TokenHashes: []string{hash}, CreatedAt: w.now.Add(-age), UpdatedAt: w.now.Add(-age), HeartbeatAt: w.now}
	if err := w.store.Create(t.Context(), s, nil); err != nil {
		t.Fatal(err)
	}
	return s, tok
}

func code(err error) apierror.Code {
	var e *apierror.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

const (
	id1 = "0f8fad5b-d9cb-469f-a165-70867728950e"
	id2 = "1f8fad5b-d9cb-469f-a165-70867728950e"
	id3 = "2f8fad5b-d9cb-469f-a165-70867728950e"
)

// An app lists its tenant's agents, newest first, page by page, and never
// another tenant's.
func TestListPagesATenantsAgents(t *testing.T) {
	w := newWorld(t)
	w.add(t, id1, "acme", session.Working, 3*time.Minute)
	w.add(t, id2, "acme", session.Ended, 2*time.Minute)
	w.add(t, id3, "other", session.Working, time.Minute)
	app, err := w.svc.Authenticate(t.Context(), w.acme)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	q := fleet.ListQuery{Limit: 1}
	for range 3 {
		page, err := w.svc.List(t.Context(), app, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page.Agents {
			got = append(got, a.AgentID)
		}
		if page.NextCursor == nil {
			break
		}
		q.Cursor = *page.NextCursor
	}
	if len(got) != 2 || got[0] != id2 || got[1] != id1 {
		t.Fatalf("listed %v, want %s then %s", got, id2, id1)
	}
	alive, err := fleet.ParseListQuery(map[string]string{"alive": "true"})
	if err != nil {
		t.Fatal(err)
	}
	page, err := w.svc.List(t.Context(), app, alive)
	if err != nil || len(page.Agents) != 1 || page.Agents[0].AgentID != id1 || !page.Agents[0].Alive || page.Agents[0].Remaining == nil {
		t.Fatalf("alive=true listed %+v, %v", page, err)
	}
	if _, err := w.svc.List(t.Context(), app, fleet.ListQuery{Limit: fleet.MaxListLimit + 1}); code(err) != apierror.InvalidRequest {
		t.Fatalf("limit over the most: %v", err)
	}
}

func TestParseListQuery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]string
		ok     bool
	}{
		{"none", map[string]string{}, true},
		{"filters", map[string]string{"project_name": "p", "persona_slug": "dev", "agent_type": "t", "state": "working,idle", "limit": "10"}, true},
		{"alive", map[string]string{"alive": "true"}, true},
		{"unknown state", map[string]string{"state": "asleep"}, false},
		{"alive and state", map[string]string{"alive": "true", "state": "ended"}, false},
		{"limit zero", map[string]string{"limit": "0"}, false},
		{"limit not a number", map[string]string{"limit": "ten"}, false},
		{"unknown parameter", map[string]string{"other": "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fleet.ParseListQuery(tc.params)
			if (err == nil) != tc.ok || (err != nil && code(err) != apierror.InvalidRequest) {
				t.Fatalf("ParseListQuery(%v) = %v", tc.params, err)
			}
		})
	}
}

// A kill ends the agent before it answers and queues its stop with no
// grace; a second kill queues the stop again; another tenant's app key
// finds no agent.
func TestKill(t *testing.T) {
	w := newWorld(t)
	_, tok := w.add(t, id1, "acme", session.Working, time.Minute)
	if _, err := w.svc.Kill(t.Context(), id1, w.other); code(err) != apierror.AgentNotFound {
		t.Fatalf("kill with another tenant's key: %v", err)
	}
	out, err := w.svc.Kill(t.Context(), id1, w.acme)
	if err != nil || out.Status != fleet.Killed || out.State != session.Ended || out.Reason != session.ReasonKilled {
		t.Fatalf("kill = %+v, %v", out, err)
	}
	if len(w.jobs.sent) != 1 || w.jobs.sent[0].m.Type != jobqueue.SessionStop || w.jobs.sent[0].delay != 0 {
		t.Fatalf("queued %+v, want one session.stop at once", w.jobs.sent)
	}
	again, err := w.svc.Kill(t.Context(), id1, tok)
	if err != nil || again.Status != session.AlreadyTerminated || len(w.jobs.sent) != 2 {
		t.Fatalf("second kill with the session token = %+v, %v; queued %d", again, err, len(w.jobs.sent))
	}
	if _, err := w.svc.Kill(t.Context(), id2, w.acme); code(err) != apierror.AgentNotFound {
		t.Fatalf("kill of an unknown agent: %v", err)
	}
}
