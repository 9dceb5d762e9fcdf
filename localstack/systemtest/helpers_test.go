package systemtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/localstack/devtest"
	"github.com/remote-agents/remote-agents/shared/config"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// agentBin is the agent binary the sandboxes run (built by devtest.Main).
func agentBin() string { return devtest.Agent() }

const appKey = devtest.AppKey

// stack is a dev server under test, with the handles the tests use.
type stack struct {
	t          testing.TB
	srv        *devserver.Server
	env        string
	guardrails string
	logs       interface{ String() string }
	work       string
}

type option = devtest.Option

func withConfig(f func(*config.RemoteAgents)) option { return devtest.WithConfig(f) }

func withSandbox(command ...string) option { return devtest.WithSandbox(command...) }

// start runs a dev server on its own environment, with its own copy of the
// guardrails, seeded with the fixtures and appKey (package devtest).
func start(t testing.TB, opts ...option) *stack {
	t.Helper()
	st := devtest.Start(t, opts...)
	return &stack{t: t, srv: st.Server, env: st.Name, guardrails: st.Guardrails, logs: stringer(st.Logs), work: st.Work}
}

// stringer makes f a fmt.Stringer.
type stringer func() string

func (f stringer) String() string { return f() }

type reply struct {
	status  int
	body    map[string]any
	raw     string
	headers http.Header
}

func (r reply) str(key string) string {
	s, _ := r.body[key].(string)
	return s
}

// details is an error envelope's details (nil: none).
func (r reply) details() map[string]any {
	d, _ := r.body["details"].(map[string]any)
	return d
}

// call sends one request; body may be a string (sent as is) or a value (JSON).
func (s *stack) call(method, path, bearer string, body any, headers ...string) reply {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.srv.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	r := reply{status: res.StatusCode, raw: string(raw), headers: res.Header}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func createBody(prompt string) map[string]any {
	return map[string]any{"project_name": "demo", "persona_slug": "assistant", "initial_prompt": prompt}
}

func (s *stack) create(body any, headers ...string) reply {
	s.t.Helper()
	return s.call(http.MethodPost, "/api/remote_agents/create", appKey, body, headers...)
}

// createReady creates an agent as the route's documented client does: a
// 408 (still starting, as on a loaded machine) is sent again with the
// Idempotency-Key it names, a few times, to keep waiting for the same agent.
func (s *stack) createReady(body any) reply {
	s.t.Helper()
	r := s.create(body)
	for tries := 0; r.status == http.StatusRequestTimeout && tries < 3; tries++ {
		details, _ := r.body["details"].(map[string]any)
		key, _ := details["idempotency_key"].(string)
		if key == "" {
			break
		}
		r = s.create(body, "Idempotency-Key", key)
	}
	return r
}

// mustCreate creates a ready agent and returns its id and token.
func (s *stack) mustCreate() (string, string) {
	s.t.Helper()
	r := s.createReady(createBody("Hello"))
	if r.status != http.StatusOK {
		s.t.Fatalf("create: %d %s", r.status, r.raw)
	}
	return r.str("agent_id"), r.str("session_token")
}

func (s *stack) alive(id, tok string) reply {
	s.t.Helper()
	return s.call(http.MethodGet, "/api/remote_agents/"+id+"/alive", tok, nil)
}

func (s *stack) shutdown(id, tok string) reply {
	s.t.Helper()
	return s.call(http.MethodPost, "/api/remote_agents/"+id+"/shutdown", tok, nil)
}

// wantError checks an error envelope.
func wantError(t *testing.T, r reply, status int, code string) {
	t.Helper()
	if r.status != status || r.str("error_code") != code {
		t.Errorf("got %d %s, want %d %s", r.status, r.raw, status, code)
		return
	}
	if _, ok := r.body["retryable"].(bool); !ok || r.str("message") == "" || r.body["status"] != float64(status) {
		t.Errorf("incomplete envelope: %s", r.raw)
	}
}

// eventually polls cond every 200 ms until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lastSeq is the number of the last event of agent id's stream (the
// platform's lifecycle events included).
func (s *stack) lastSeq(t testing.TB, id string) int64 {
	t.Helper()
	sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return sess.LastSeq
}
