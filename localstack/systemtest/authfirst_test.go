package systemtest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
)

// TestAuthenticationComesBeforeTheBody: on every route with a body, a caller
// with a wrong token is refused as such (401), whatever the body is:
// malformed, over the route's limit, or with fields the route does not take.
// No body is read for a caller that may not call.
func TestAuthenticationComesBeforeTheBody(t *testing.T) {
	t.Parallel()
	s := start(t)
	id, _, _ := s.storedAgent(t)
	wrongSession := "ra_sess_" + strings.Repeat("A", 43)
	wrongSandbox := "rsb_" + strings.Repeat("A", 43)
	routes := []struct {
		path, token string
	}{
		{"/api/remote_agents/create", "rak_not_a_registered_app_key"},
		{"/api/remote_agents/" + id + "/messages", wrongSession},
		{"/api/remote_agents/" + id + "/attachments", wrongSession},
		{"/api/remote_agents/" + id + "/env", wrongSession},
		{"/proliferate/" + id + "/tools/verify", wrongSandbox},
		{"/sandbox/" + id + "/status", wrongSandbox},
		{"/sandbox/" + id + "/events", wrongSandbox},
		{"/sandbox/" + id + "/uploads", wrongSandbox},
		{"/sandbox/" + id + "/model/anthropic/v1/messages", wrongSandbox},
	}
	bodies := map[string]string{
		"malformed":      `{"text": `,
		"over the limit": `{"text":"` + strings.Repeat("x", 2<<20) + `"}`,
		"unknown field":  `{"no_such_field_here": true}`,
	}
	for _, r := range routes {
		for name, body := range bodies {
			got := s.call(http.MethodPost, r.path, r.token, body)
			if got.status != http.StatusUnauthorized && got.status != http.StatusForbidden {
				t.Errorf("%s with a %s body: %d %s, want 401 or 403", r.path, name, got.status, got.raw)
			}
			if strings.Contains(got.raw, "no_such_field_here") {
				t.Errorf("%s echoes a field name: %s", r.path, got.raw)
			}
		}
	}
}

// storedAgent writes a ready session straight to the store, with no sandbox
// behind it, and returns its id, session token and sandbox token.
func (s *stack) storedAgent(t testing.TB) (string, string, string) {
	t.Helper()
	tok, tokHash := token.New(token.Session)
	sb, sbHash := token.New(token.Sandbox)
	now := time.Now().UTC()
	sess := session.Session{
		ID: uuid.NewString(), Blueprint: session.Blueprint{
			PersonaSlug:     "assistant",
			ProjectName:     "demo",
			InitialPrompt:   "Hello",
			TmuxSessionName: "ra-outage",
		},

		State: session.Ready, Generation: 1, TokenHashes: []string{tokHash}, SandboxTokenHash: sbHash,
		CreatedAt: now, UpdatedAt: now, ReadyAt: now, HeartbeatAt: now,
	}
	if err := s.srv.Env.SessionStore().Create(t.Context(), sess, nil); err != nil {
		t.Fatal(err)
	}
	return sess.ID, tok, sb
}
