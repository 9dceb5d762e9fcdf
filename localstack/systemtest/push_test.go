package systemtest_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/shared/apigwpush"
	"github.com/remote-agents/remote-agents/shared/session"
)

// pushURL is the dev server's push channel for session id.
func (s *stack) pushURL(id string) string {
	return "ws" + strings.TrimPrefix(s.srv.URL, "http") + devserver.PushPath + "?session_id=" + id
}

// connection waits until session id's record holds a push connection other
// than not, and returns it.
func (s *stack) connection(t testing.TB, id, not string) string {
	t.Helper()
	var conn string
	eventually(t, 40*time.Second, "push connection recorded", func() bool {
		sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
		conn = sess.PushConnectionID
		return err == nil && conn != "" && conn != not
	})
	return conn
}

// sandboxLog is what session id's (first) sandbox logged so far.
func (s *stack) sandboxLog(t testing.TB, id string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(s.work, "sandboxes", id+"-1.log"))
	return string(b)
}

// reply waits for the agent's answer quoting text.
func (s *stack) reply(t *testing.T, id, text string) {
	t.Helper()
	eventually(t, 20*time.Second, "answer to "+text, func() bool {
		evs, _ := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 100)
		for _, e := range evs {
			if got, _ := e.Data["text"].(string); e.Type == "agent.message" && strings.Contains(got, text) {
				return true
			}
		}
		return false
	})
}

// A user's message reaches the sandbox over its push connection: its inbox
// poll is an hour apart, so only the push explains the answer, and the
// sandbox logs that a push made it read its inbox. Its heartbeat, whose
// answer carries a stop too, is as far apart, so only the push explains
// the stop.
func TestMessageReachesSandboxOverPush(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_INBOX_POLL_SECONDS=3600", "RA_HEARTBEAT_SECONDS=3600"))
	id, tok := s.mustCreate()
	s.connection(t, id, "")
	s.reply(t, id, "Hello") // the initial prompt's turn
	r := s.call(http.MethodPost, "/api/remote_agents/"+id+"/messages", tok, map[string]any{"text": "pushed to you"})
	if r.status != http.StatusOK {
		t.Fatalf("message: %d %s", r.status, r.raw)
	}
	s.reply(t, id, "pushed to you")
	if log := s.sandboxLog(t, id); !strings.Contains(log, `"msg":"inbox read","cause":"push","messages":1`) {
		t.Errorf("the sandbox did not log a pushed inbox read:\n%s", log)
	}
	// A shutdown is pushed too: the sandbox stops long before its next poll.
	if r := s.shutdown(id, tok); r.status != http.StatusOK {
		t.Fatalf("shutdown: %d %s", r.status, r.raw)
	}
	eventually(t, 20*time.Second, "session ended", func() bool { return s.alive(id, tok).str("state") == "ended" })
	if log := s.sandboxLog(t, id); !strings.Contains(log, `"cause":"push","messages":0,"env_values":0,"stop":true`) {
		t.Errorf("the stop was not pushed:\n%s", log)
	}
}

// With the push channel down, the inbox poll still delivers; once it is back
// the sandbox reconnects, and the platform's Management API client (the real
// SDK, against the dev server's @connections) reaches the new connection.
func TestPushDownFallsBackToPollAndReconnects(t *testing.T) {
	t.Parallel()
	s := start(t)
	id, tok := s.mustCreate()
	first := s.connection(t, id, "")
	s.reply(t, id, "Hello")

	s.srv.RefusePush(true)
	eventually(t, 20*time.Second, "$disconnect clears the connection", func() bool {
		sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
		return err == nil && sess.PushConnectionID == ""
	})
	if r := s.call(http.MethodPost, "/api/remote_agents/"+id+"/messages", tok, map[string]any{"text": "while the push is down"}); r.status != http.StatusOK {
		t.Fatalf("message: %d %s", r.status, r.raw)
	}
	s.reply(t, id, "while the push is down")
	if log := s.sandboxLog(t, id); !strings.Contains(log, `"msg":"inbox read","cause":"poll","messages":1`) {
		t.Errorf("the message did not come by the poll:\n%s", log)
	}

	s.srv.RefusePush(false)
	again := s.connection(t, id, first)
	n := apigwpush.New(apigwpush.NewClient(s.srv.Env.AWS, s.srv.URL))
	if err := n.Push(t.Context(), again, []byte(`{"type":"inbox"}`)); err != nil {
		t.Errorf("push to the new connection: %v", err)
	}
	if err := n.Push(t.Context(), first, []byte(`{"type":"inbox"}`)); !errors.Is(err, session.ErrGone) {
		t.Errorf("push to the closed connection: %v, want ErrGone", err)
	}
}

// A push that finds its connection gone (the sandbox's socket died without a
// $disconnect) forgets it, within the message's request, which still
// succeeds: the message is in the inbox, which the sandbox polls.
func TestGonePushConnectionIsForgotten(t *testing.T) {
	t.Parallel()
	s := start(t)
	id, tok := s.mustCreate()
	s.connection(t, id, "")
	sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	const stale = "c3RhbGVjb25uZWM="
	if err := s.srv.Env.SessionStore().SetPushConnection(t.Context(), id, sess.Generation, stale, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if r := s.call(http.MethodPost, "/api/remote_agents/"+id+"/messages", tok, map[string]any{"text": "to a gone socket"}); r.status != http.StatusOK {
		t.Fatalf("message: %d %s", r.status, r.raw)
	}
	after, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil || after.PushConnectionID != "" {
		t.Errorf("connection after a GoneException: %q, %v", after.PushConnectionID, err)
	}
	s.reply(t, id, "to a gone socket")
}

// $connect takes the session's own sandbox token only: a wrong one, another
// session's sandbox token or a session token is refused, and the upgrade with
// them. The right one is recorded, and forgotten on close ($disconnect).
func TestPushConnectAuthenticatesTheSandbox(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox())
	id, tok, sb, _ := s.readySandbox(t, createBody("Hi"))
	go func() {
		// Its answer does not matter (it never becomes ready): only its sandbox token.
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.srv.URL+"/api/remote_agents/create",
			strings.NewReader(`{"project_name":"demo","persona_slug":"assistant","initial_prompt":"Another"}`))
		req.Header.Set("Authorization", "Bearer "+appKey)
		req.Header.Set("Content-Type", "application/json")
		if res, err := http.DefaultClient.Do(req); err == nil {
			_ = res.Body.Close()
		}
	}()
	other := s.firstSandboxExcept(t, map[string]bool{id: true})
	otherSB := s.sandboxToken(t, other)

	dial := func(session, bearer string) (*websocket.Conn, int) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		c, res, err := websocket.Dial(ctx, s.pushURL(session), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + bearer}}})
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		if err != nil {
			return nil, status
		}
		return c, status
	}
	for _, c := range []struct {
		name, session, bearer string
		want                  int
	}{
		{"wrong token", id, "rsb_" + strings.Repeat("x", 43), http.StatusUnauthorized},
		{"another session's sandbox token", id, otherSB, http.StatusUnauthorized},
		{"a session token", id, tok, http.StatusForbidden},
		{"no token", id, "", http.StatusUnauthorized},
		{"an unknown session", "00000000-0000-4000-8000-000000000000", sb, http.StatusUnauthorized},
	} {
		if conn, status := dial(c.session, c.bearer); conn != nil || status != c.want {
			t.Errorf("%s: connected %v, status %d, want %d", c.name, conn != nil, status, c.want)
		}
	}
	if sess, _ := s.srv.Env.SessionStore().Get(t.Context(), id); sess.PushConnectionID != "" {
		t.Errorf("a refused connect was recorded: %q", sess.PushConnectionID)
	}

	conn, status := dial(id, sb)
	if conn == nil {
		t.Fatalf("the sandbox's own token: status %d", status)
	}
	connID := s.connection(t, id, "")
	// A push reaches it as one text frame.
	n := apigwpush.New(apigwpush.NewClient(s.srv.Env.AWS, s.srv.URL))
	if err := n.Push(t.Context(), connID, []byte(`{"type":"inbox"}`)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if typ, data, err := conn.Read(ctx); err != nil || typ != websocket.MessageText || string(data) != `{"type":"inbox"}` {
		t.Errorf("frame: %v %q %v", typ, data, err)
	}
	_ = conn.Close(websocket.StatusNormalClosure, "")
	eventually(t, 10*time.Second, "$disconnect clears the connection", func() bool {
		sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
		return err == nil && sess.PushConnectionID == ""
	})
	if err := n.Push(t.Context(), connID, []byte(`{"type":"inbox"}`)); !errors.Is(err, session.ErrGone) {
		t.Errorf("push after close: %v, want ErrGone", err)
	}
}
