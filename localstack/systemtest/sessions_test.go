package systemtest_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/sandbox/remote"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/token"
)

func TestCreateReturnsReadyAgentWithEveryField(t *testing.T) {
	t.Parallel()
	s := start(t)
	r := s.create(map[string]any{
		"project_name": "demo", "persona_slug": "assistant", "initial_prompt": "Summarise the repository.",
		"feature_flags": map[string]bool{"file_upload": true},
	})
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	for _, f := range []string{"agent_id", "embed_url", "session_token", "project_name", "persona_slug", "tmux_session_name", "status", "guardrails_version"} {
		if r.str(f) == "" {
			t.Errorf("field %s missing in %s", f, r.raw)
		}
	}
	id, tok := r.str("agent_id"), r.str("session_token")
	doc, err := guardrails.Load(t.Context(), guardrails.File(s.guardrails))
	if err != nil {
		t.Fatal(err)
	}
	if r.str("status") != "ready" || r.str("project_name") != "demo" || r.str("persona_slug") != "assistant" || r.str("guardrails_version") != doc.Hash {
		t.Errorf("create reply %s", r.raw)
	}
	if flags, _ := r.body["feature_flags"].(map[string]any); flags["file_upload"] != true || flags["voice_mic"] != false {
		t.Errorf("feature flags %v", r.body["feature_flags"])
	}
	// The persona's type (the seeded default) has a workspace, empty.
	if ws, _ := r.body["workspace"].(map[string]any); ws["status"] != "ready" || !reflect.DeepEqual(ws["warnings"], []any{}) {
		t.Errorf("workspace %v", r.body["workspace"])
	}
	embed, err := url.Parse(r.str("embed_url"))
	if err != nil || embed.Path != "/embed/"+id || embed.Query().Get("token") != tok || !strings.HasPrefix(r.str("embed_url"), s.srv.URL) {
		t.Errorf("embed_url %q", r.str("embed_url"))
	}

	// Ready means primed: guardrails first, then persona skill and experience, then
	// the initial prompt as the first user turn.
	raw, err := os.ReadFile(filepath.Join(s.work, "sandboxes", id+"-1", remote.ConversationFile))
	if err != nil {
		t.Fatal(err)
	}
	var conv []remote.Message
	if err := json.Unmarshal(raw, &conv); err != nil {
		t.Fatal(err)
	}
	if len(conv) != 2 || conv[0].Role != "system" || !strings.HasPrefix(conv[0].Content, doc.Content) ||
		!strings.Contains(conv[0].Content, "helpful, precise assistant") || conv[1].Role != "user" || conv[1].Content != "Summarise the repository." {
		t.Errorf("primed conversation:\n%s", raw)
	}
	skill := strings.Index(conv[0].Content, "# Persona skill")
	experience := strings.Index(conv[0].Content, "# Persona experience")
	if skill < len(doc.Content) || experience < skill {
		t.Errorf("priming order: guardrails end at %d, skill at %d, experience at %d", len(doc.Content), skill, experience)
	}

	alive := s.alive(id, tok)
	running := map[string]bool{"ready": true, "working": true, "idle": true} // it answers its initial prompt meanwhile
	if alive.status != http.StatusOK || alive.body["alive"] != true || !running[alive.str("state")] ||
		alive.str("guardrails_version") != doc.Hash || alive.body["guardrails_stale"] != false {
		t.Errorf("alive: %d %s", alive.status, alive.raw)
	}
}

func TestTokensAreRandomAndStoredOnlyAsHashes(t *testing.T) {
	t.Parallel()
	s := start(t)
	id, tok := s.mustCreate()
	if err := token.Check(token.Session, tok); err != nil {
		t.Fatalf("session token %q: %v", tok, err)
	}
	if strings.Contains(tok, id) || strings.Contains(tok, strings.ReplaceAll(id, "-", "")) {
		t.Errorf("token %q carries the agent id", tok)
	}
	set, err := resources.For(s.env)
	if err != nil {
		t.Fatal(err)
	}
	api := awsconfig.NewDynamoDB(awstest.Config(t))
	scan, err := api.Scan(t.Context(), &dynamodb.ScanInput{TableName: &set.Sessions.Name})
	if err != nil {
		t.Fatal(err)
	}
	if len(scan.Items) != 1 {
		t.Fatalf("%d session items", len(scan.Items))
	}
	raw, err := json.Marshal(scan.Items[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), tok) || strings.Contains(string(raw), strings.TrimPrefix(tok, "ras_")) {
		t.Errorf("stored session holds the token in clear: %s", raw)
	}
	if !strings.Contains(string(raw), token.Hash(tok)) {
		t.Errorf("stored session lacks the token hash")
	}
	if regexp.MustCompile(`rsb_[A-Za-z0-9_-]{43}`).Match(raw) {
		t.Errorf("stored session holds a sandbox token in clear")
	}
}

func TestCreateTimesOutWhenSandboxNeverReady(t *testing.T) {
	t.Parallel()
	s := start(t, withSandbox("/bin/sh", "-c", "sleep 30"), withConfig(func(c *config.RemoteAgents) {
		c.CreationTimeout = 2 * time.Second
	}))
	began := time.Now()
	r := s.create(createBody("Hello"))
	wantError(t, r, http.StatusRequestTimeout, "agent_creation_timeout")
	if r.body["retryable"] != true {
		t.Errorf("timeout not retryable: %s", r.raw)
	}
	if took := time.Since(began); took < 2*time.Second || took > 8*time.Second {
		t.Errorf("timeout after %s, configured 2s", took)
	}
}

func TestAuthErrors(t *testing.T) {
	t.Parallel()
	s := start(t)
	wantError(t, s.call(http.MethodPost, "/api/remote_agents/create", "", createBody("x")), 401, "missing_token")
	wantError(t, s.call(http.MethodPost, "/api/remote_agents/create", "rak_wrong", createBody("x")), 401, "invalid_token")
	idA, tokA := s.mustCreate()
	idB, tokB := s.mustCreate()
	wantError(t, s.alive(idA, ""), 401, "missing_token")
	wantError(t, s.alive(idA, "ras_garbage"), 401, "invalid_token")
	wantError(t, s.alive(idB, tokA), 401, "invalid_token")
	wantError(t, s.shutdown(idB, tokA), 401, "invalid_token")
	wantError(t, s.shutdown(idA, ""), 401, "missing_token")
	if r := s.alive(idB, tokB); r.body["alive"] != true {
		t.Errorf("B after refused calls: %s", r.raw)
	}
	// The sandbox channel takes sandbox tokens only.
	wantError(t, s.call(http.MethodGet, "/sandbox/"+idA+"/spec", tokA, nil), 403, "forbidden")
	wantError(t, s.call(http.MethodGet, "/sandbox/"+idA+"/spec", "rsb_"+strings.Repeat("A", 43), nil), 401, "invalid_token")
}

func TestShutdownTwice(t *testing.T) {
	t.Parallel()
	s := start(t)
	id, tok := s.mustCreate()
	r := s.shutdown(id, tok)
	if r.status != 200 || r.str("status") != "shutdown_initiated" || r.str("agent_id") != id {
		t.Fatalf("shutdown: %d %s", r.status, r.raw)
	}
	eventually(t, 15*time.Second, "session ended", func() bool {
		return s.alive(id, tok).str("state") == "ended"
	})
	if r := s.alive(id, tok); r.body["alive"] != false {
		t.Errorf("alive after shutdown: %s", r.raw)
	}
	if r := s.shutdown(id, tok); r.status != 200 || r.str("status") != "already_terminated" {
		t.Errorf("second shutdown: %d %s", r.status, r.raw)
	}
	eventually(t, 10*time.Second, "sandbox process gone", func() bool { return len(s.srv.Launcher.Running()) == 0 })
}

// TestGuardrailsMissingFailsClosed: with the configured guardrails file gone,
// create is 503 guardrails_missing, writes no session, starts no sandbox and
// logs a critical report. Empty, blank and unreadable guardrails are the
// creator's rule: shared/session TestCreateFailsClosedWithoutGuardrails.
func TestGuardrailsMissingFailsClosed(t *testing.T) {
	t.Parallel()
	cases := map[string]func(path string){
		"missing": func(p string) { _ = os.Remove(p) },
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := start(t)
			breakIt(s.guardrails)
			r := s.create(createBody("Hello"))
			wantError(t, r, http.StatusServiceUnavailable, "guardrails_missing")
			if strings.Contains(r.raw, s.guardrails) {
				t.Errorf("reply leaks the path: %s", r.raw)
			}
			set, err := resources.For(s.env)
			if err != nil {
				t.Fatal(err)
			}
			scan, err := awsconfig.NewDynamoDB(awstest.Config(t)).Scan(t.Context(), &dynamodb.ScanInput{TableName: &set.Sessions.Name})
			if err != nil {
				t.Fatal(err)
			}
			if len(scan.Items) != 0 {
				t.Errorf("%d sessions created without guardrails", len(scan.Items))
			}
			if n := len(s.srv.Launcher.Running()); n != 0 {
				t.Errorf("%d sandboxes started without guardrails", n)
			}
			logs := s.logs.String()
			if !strings.Contains(logs, `"source":"guardrail_injection"`) || !strings.Contains(logs, `"severity":"critical"`) ||
				!strings.Contains(logs, `"ctx_persona_slug":"assistant"`) {
				t.Errorf("no critical guardrail_injection report:\n%s", logs)
			}
		})
	}
}

func TestGuardrailsChangeMakesAgentStale(t *testing.T) {
	t.Parallel()
	s := start(t)
	id, tok := s.mustCreate()
	if r := s.alive(id, tok); r.body["guardrails_stale"] != false {
		t.Fatalf("fresh agent: %s", r.raw)
	}
	f, err := os.OpenFile(s.guardrails, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n## 7. Extra rule\n- Be brief.\n"); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if r := s.alive(id, tok); r.body["guardrails_stale"] != true || r.body["alive"] != true {
		t.Errorf("after change: %s", r.raw)
	}
}

func TestKilledSandboxIsNotAlive(t *testing.T) {
	t.Parallel()
	s := start(t)
	id, tok := s.mustCreate()
	refs := s.srv.Launcher.Running()
	if len(refs) != 1 {
		t.Fatalf("running sandboxes %v", refs)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(refs[0], "pid:"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "alive false after kill", func() bool {
		return s.alive(id, tok).body["alive"] == false
	})
	if r := s.alive(id, tok); r.str("state") != "ended" {
		t.Errorf("after kill: %s", r.raw)
	}
}

func TestIdempotentCreate(t *testing.T) {
	t.Parallel()
	s := start(t)
	first := s.create(createBody("Hello"), "Idempotency-Key", "order-42")
	second := s.create(createBody("Hello"), "Idempotency-Key", "order-42")
	if first.status != 200 || second.status != 200 {
		t.Fatalf("creates: %d %s / %d %s", first.status, first.raw, second.status, second.raw)
	}
	if first.str("agent_id") != second.str("agent_id") {
		t.Errorf("same key gave agents %s and %s", first.str("agent_id"), second.str("agent_id"))
	}
	for _, r := range []reply{first, second} {
		if a := s.alive(r.str("agent_id"), r.str("session_token")); a.body["alive"] != true {
			t.Errorf("token of a replayed create refused: %s", a.raw)
		}
	}
	if n := len(s.srv.Launcher.Running()); n != 1 {
		t.Errorf("%d sandboxes for one idempotent create", n)
	}
	wantError(t, s.create(createBody("Something else"), "Idempotency-Key", "order-42"), 409, "idempotency_key_reused")
	if other := s.create(createBody("Hello"), "Idempotency-Key", "order-43"); other.str("agent_id") == first.str("agent_id") {
		t.Errorf("another key reused the agent")
	}
	// An empty key is no key of 1 to 255 characters, not none.
	wantError(t, s.create(createBody("Hello"), "Idempotency-Key", ""), 400, "invalid_request")
}

func TestIdempotentCreateRetriedAfterTimeoutKeepsWaiting(t *testing.T) {
	t.Parallel()
	// The sandbox takes 3 s to start; create gives up after 2 s. Each retry
	// with the key, as a client makes them, waits on the same agent (however
	// slow the machine) and the one that finds it ready answers it.
	s := start(t, withSandbox("/bin/sh", "-c", "sleep 3; exec "+agentBin()+" sandbox"), withConfig(func(c *config.RemoteAgents) {
		c.CreationTimeout = 2 * time.Second
	}))
	first := s.create(createBody("Hello"), "Idempotency-Key", "slow-1")
	wantError(t, first, http.StatusRequestTimeout, "agent_creation_timeout")
	agent := first.details()["agent_id"]
	if agent == nil {
		t.Fatalf("the 408 names no agent: %s", first.raw)
	}
	var second reply
	for range 30 {
		second = s.create(createBody("Hello"), "Idempotency-Key", "slow-1")
		if second.status != http.StatusRequestTimeout {
			break
		}
		if got := second.details()["agent_id"]; got != agent {
			t.Fatalf("a retry waited on agent %v, the first create on %v", got, agent)
		}
	}
	if second.status != 200 || second.str("agent_id") != agent {
		t.Fatalf("retry: %d %s, want agent %v ready", second.status, second.raw, agent)
	}
	if n := len(s.srv.Launcher.Running()); n != 1 {
		t.Errorf("%d sandboxes after a retried create", n)
	}
}

// TestBadRequestsAreRefused: what the route's decoding refuses, and one rule of
// the service's (each is in shared/session TestCreateRefusesBadRequests) to
// show they reach the client as 400 invalid_request.
func TestBadRequestsAreRefused(t *testing.T) {
	t.Parallel()
	s := start(t)
	cases := map[string]any{
		"malformed JSON":       `{"project_name": "demo",`,
		"not an object":        `["demo"]`,
		"unknown field":        map[string]any{"project_name": "demo", "persona_slug": "assistant", "initial_prompt": "x", "admin": true},
		"missing prompt":       map[string]any{"project_name": "demo", "persona_slug": "assistant"},
		"wrong type":           map[string]any{"project_name": 7, "persona_slug": "assistant", "initial_prompt": "x"},
		"unknown feature flag": map[string]any{"project_name": "demo", "persona_slug": "assistant", "initial_prompt": "x", "feature_flags": map[string]bool{"camera": true}},
	}
	for name, body := range cases {
		r := s.create(body)
		if r.status != 400 || r.str("error_code") != "invalid_request" {
			t.Errorf("%s: %d %s", name, r.status, r.raw)
		}
	}
	wantError(t, s.create(`{"initial_prompt":"`+strings.Repeat("x", 70*1024)+`"}`), 413, "payload_too_large")
	wantError(t, s.create(createBody("x"), "Content-Type", "text/plain"), 415, "unsupported_media_type")
	wantError(t, s.create(createBody("x"), "Idempotency-Key", strings.Repeat("k", 256)), 400, "invalid_request")
	wantError(t, s.call(http.MethodGet, "/api/remote_agents/create", appKey, nil), 405, "method_not_allowed")
	wantError(t, s.call(http.MethodGet, "/api/remote_agents/nope", appKey, nil), 404, "not_found")
}

func TestCORS(t *testing.T) {
	t.Parallel()
	s := start(t, withConfig(func(c *config.RemoteAgents) { c.AllowedOrigins = []string{"https://app.example.com"} }))
	id, tok := s.mustCreate()
	allowed := s.call(http.MethodGet, "/api/remote_agents/"+id+"/alive", tok, nil, "Origin", "https://app.example.com")
	if allowed.headers.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Errorf("allowed origin got headers %v", allowed.headers)
	}
	preflight := s.call(http.MethodOptions, "/api/remote_agents/create", "", nil,
		"Origin", "https://app.example.com", "Access-Control-Request-Method", "POST")
	if preflight.status != 204 || preflight.headers.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(preflight.headers.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", preflight.status, preflight.headers)
	}
	for _, r := range []reply{
		s.call(http.MethodGet, "/api/remote_agents/"+id+"/alive", tok, nil, "Origin", "https://evil.example.com"),
		s.call(http.MethodOptions, "/api/remote_agents/create", "", nil, "Origin", "https://evil.example.com", "Access-Control-Request-Method", "POST"),
	} {
		for k := range r.headers {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("refused origin got %s", k)
			}
		}
	}
}

// With tmux installed (CI installs it), the agent runs in the tmux session the
// create reply names, and the session is gone once the agent is shut down.
func TestAgentRunsInNamedTmuxSession(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed: .ci/run installs it")
	}
	s := start(t)
	r := s.createReady(createBody("Hello"))
	if r.status != 200 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	name := r.str("tmux_session_name")
	has := func() bool { return exec.Command("tmux", "-L", name, "has-session", "-t", "="+name).Run() == nil }
	if !has() {
		t.Fatalf("no tmux session %q while the agent runs", name)
	}
	out, err := exec.Command("tmux", "-L", name, "list-panes", "-t", name, "-F", "#{pane_current_command}").Output()
	if err != nil || !strings.Contains(string(out), "agent") {
		t.Errorf("tmux pane runs %q (%v), want the agent", out, err)
	}
	if sd := s.shutdown(r.str("agent_id"), r.str("session_token")); sd.str("status") != "shutdown_initiated" {
		t.Fatalf("shutdown: %s", sd.raw)
	}
	eventually(t, 15*time.Second, "tmux session gone", func() bool { return !has() })
	eventually(t, 15*time.Second, "sandbox process gone", func() bool { return len(s.srv.Launcher.Running()) == 0 })
}

// The dev server serves exactly the routes of the route table, streaming where
// the table says so: what runs locally is what the stack deploys.
func TestServesTheRouteTable(t *testing.T) {
	t.Parallel()
	s := start(t)
	served := map[string]bool{}
	for _, r := range s.srv.Routes() {
		served[r.Key()] = r.Stream != nil
	}
	for _, r := range routes.All() {
		stream, ok := served[r.Key()]
		if !ok {
			t.Errorf("the dev server does not serve %s", r.Key())
		}
		if stream != r.Stream {
			t.Errorf("%s: streaming %v, the table says %v", r.Key(), stream, r.Stream)
		}
		delete(served, r.Key())
	}
	for key := range served {
		t.Errorf("the dev server serves %s, which the route table lacks", key)
	}
}

// TestCreateWithoutAModelIs503: ready means usable. A sandbox given no model
// (RA_LLM_PROVIDER unset) never reports ready: create answers 503
// model_unavailable, not retryable, and nothing is left running.
func TestCreateWithoutAModelIs503(t *testing.T) {
	t.Parallel()
	s := start(t, withoutModel())
	r := s.create(createBody("Hello"))
	wantError(t, r, http.StatusServiceUnavailable, "model_unavailable")
	if r.body["retryable"] != false {
		t.Errorf("model_unavailable is retryable: %s", r.raw)
	}
	eventually(t, 20*time.Second, "no sandbox left running", func() bool { return len(s.srv.Launcher.Running()) == 0 })
}

// TestBodyLimitBeforeReading: like API Gateway, a body declared larger than
// 10 MB is refused with 413 before any of it is read: the client that sent
// only the headers gets its answer.
func TestBodyLimitBeforeReading(t *testing.T) {
	t.Parallel()
	s := start(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	req := "POST /api/remote_agents/create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20000000\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body is unsent: %v", err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), "payload_too_large") {
		t.Errorf("got %d %s", res.StatusCode, raw)
	}
}
