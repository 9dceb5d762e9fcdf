package systemtest_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/wiring/egressservice"
)

// recorder is a local server that keeps the headers of what it was sent.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func record(t *testing.T, name string) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Header.Clone())
		r.mu.Unlock()
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) addr() string { return strings.TrimPrefix(r.URL, "http://") }

func (r *recorder) headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.seen...)
}

// bash runs command through the workspace tool API and returns its output,
// asking again (the same request) while it is pending.
func (s *stack) bash(t testing.TB, id, tok, command string) string {
	t.Helper()
	key := "bash-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	body := map[string]any{"args": map[string]any{"command": command}}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		r := s.runTool(id, tok, "bash", body, "Idempotency-Key", key)
		if r.status == http.StatusAccepted && time.Now().Before(deadline) {
			continue // the answer waits for the result a while each time
		}
		if r.status != http.StatusOK {
			t.Fatalf("bash %q: %d %s", command, r.status, r.raw)
		}
		return r.str("output")
	}
}

// codeIn is the status a curl -w 'code=%{http_code}' printed in a bash
// tool's output.
func codeIn(out string) string {
	_, code, _ := strings.Cut(out, "code=")
	if f := strings.Fields(code); len(f) > 0 {
		return f[0]
	}
	return ""
}

// TestEgressAllowlistHoldsOutsideTheSandbox (issue 30), driving bash
// through the workspace tool API as an app would: with an allowlist of one
// loopback server, curl reaches it through the proxy; another loopback
// address, another port and a raw IP are refused by the proxy (403, and an
// egress.denied event), and without the proxy (HTTP_PROXY unset, or a
// program that ignores it) nothing is reachable at all. A session token may
// narrow the policy, not widen it; the app key may; alive shows it.
func TestEgressAllowlistHoldsOutsideTheSandbox(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	allowed, other := record(t, "allowed"), record(t, "other")
	_, port, _ := net.SplitHostPort(allowed.addr())
	s.putType(t, "fenced", map[string]any{"enabled": true, "tools": []string{"bash"},
		"egress": map[string]any{"mode": "allowlist", "allow": []string{allowed.addr()}}})
	id, tok := s.createTyped(t, "fenced")

	curl := func(args string) string {
		t.Helper()
		out := s.bash(t, id, tok, "curl -s -m 5 -o /dev/null -w 'code=%{http_code}' "+args+"; true")
		return codeIn(out)
	}
	if got := curl(allowed.URL + "/"); got != "200" {
		t.Fatalf("the allowed server: %s", got)
	}
	for what, args := range map[string]string{
		"another port":           other.URL + "/",
		"another loopback":       "http://127.0.0.2:" + port + "/",
		"a raw IP":               "http://192.0.2.10/",
		"a raw IP over https":    "https://192.0.2.10/",
		"a host name not listed": "https://example.com/",
	} {
		want := "403"
		if strings.HasPrefix(args, "https") {
			want = "000" // the CONNECT's 403 ends it before any request
		}
		if got := curl(args); got != want {
			t.Errorf("%s through the proxy: %s, want %s", what, got, want)
		}
	}
	// Around the proxy: nothing answers.
	unset := "env -u HTTP_PROXY -u http_proxy -u HTTPS_PROXY -u https_proxy -u ALL_PROXY -u all_proxy "
	for what, args := range map[string]string{
		"the allowed server, HTTP_PROXY unset": unset + allowed.URL + "/",
		"the allowed server, --noproxy":        "--noproxy '*' " + allowed.URL + "/",
		"a raw IP, HTTP_PROXY unset":           unset + "http://192.0.2.10/",
	} {
		if strings.HasPrefix(args, "env ") {
			args = strings.TrimPrefix(args, unset)
			out := s.bash(t, id, tok, unset+"curl -s -m 5 -o /dev/null -w 'code=%{http_code}' "+args+"; true")
			if got := codeIn(out); got != "000" {
				t.Errorf("%s: %s", what, got)
			}
			continue
		}
		if got := curl(args); got != "000" {
			t.Errorf("%s: %s", what, got)
		}
	}
	if out := s.bash(t, id, tok, "(exec 3<>/dev/tcp/127.0.0.1/"+port+") 2>/dev/null && echo reached || echo refused; (exec 3<>/dev/tcp/192.0.2.10/80) 2>/dev/null && echo reached || echo refused"); strings.Count(out, "refused") != 2 {
		t.Errorf("a program that ignores proxy variables: %s", out)
	}
	if n := len(other.headers()); n != 0 {
		t.Errorf("the server not allowed got %d requests", n)
	}
	// The refusals are events of the agent.
	eventually(t, 10*time.Second, "egress.denied events", func() bool {
		evs, err := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 1000)
		if err != nil {
			return false
		}
		hosts := map[string]bool{}
		for _, e := range evs {
			if e.Type == sandboxwire.TypeEgressDenied {
				hosts[e.Data["host"].(string)] = true
			}
		}
		return hosts["127.0.0.1"] && hosts["127.0.0.2"] && hosts["192.0.2.10"] && hosts["example.com"]
	})
	if a := s.alive(id, tok); a.status != http.StatusOK || !strings.Contains(string(a.raw), `"egress":{"mode":"allowlist","allow":["`+allowed.addr()+`"]}`) {
		t.Errorf("alive: %s", a.raw)
	}

	// The session token may narrow, not widen; the app key may widen.
	patch := func(bearer string, policy map[string]any) reply {
		return s.call(http.MethodPatch, "/api/remote_agents/"+id+"/egress", bearer, policy)
	}
	wantError(t, patch(tok, map[string]any{"mode": "allowlist", "allow": []string{allowed.addr(), other.addr()}}), http.StatusForbidden, "forbidden")
	wantError(t, patch(tok, map[string]any{"mode": "allowlist", "allow": []string{"https://x"}}), http.StatusBadRequest, "invalid_request")
	wantError(t, patch("", map[string]any{"mode": "none"}), http.StatusUnauthorized, "missing_token")
	if r := patch(appKey, map[string]any{"mode": "allowlist", "allow": []string{allowed.addr(), other.addr()}}); r.status != http.StatusOK {
		t.Fatalf("widen with the app key: %d %s", r.status, r.raw)
	}
	eventually(t, 10*time.Second, "the widened policy to hold", func() bool { return curl(other.URL+"/") == "200" })
	if r := patch(tok, map[string]any{"mode": "none"}); r.status != http.StatusOK || !strings.Contains(string(r.raw), `"version":2`) {
		t.Fatalf("narrow with the session token: %d %s", r.status, r.raw)
	}
	eventually(t, 10*time.Second, "the narrowed policy to hold", func() bool { return curl(allowed.URL+"/") == "403" })
}

// An agent started with open egress is not cut off: no allowlist can hold
// for it, and a change to one says so.
func TestEgressOfAnOpenAgentCannotNarrow(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	s.putType(t, "open", map[string]any{"enabled": true, "tools": []string{"bash"}, "egress": map[string]any{"mode": "open"}})
	id, tok := s.createTyped(t, "open")
	wantError(t, s.call(http.MethodPatch, "/api/remote_agents/"+id+"/egress", appKey, map[string]any{"mode": "none"}), http.StatusConflict, "egress_not_isolated")
	if a := s.alive(id, tok); !strings.Contains(string(a.raw), `"egress":{"mode":"open","allow":[]}`) {
		t.Errorf("alive: %s", a.raw)
	}
}

// TestSecretsAreInjectedNeverHeld (issue 30): a secret registered through
// the API reaches an allowed server as the header its rule writes, added
// by the egress proxy; the sandbox's environment, its processes' and every
// file it writes or is given, the agent's events and the API's answers hold
// no trace of it.
func TestSecretsAreInjectedNeverHeld(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	api := record(t, "api")
	value := "sk-" + strings.ReplaceAll(t.Name()+time.Now().Format("150405.000000000"), ".", "")
	secret := s.call(http.MethodPost, "/api/v1/secrets", appKey, map[string]any{"name": "api-key", "value": value,
		"inject": []map[string]any{{"host": "127.0.0.1", "path_prefix": "/v1/", "header": "Authorization", "format": "Bearer {{value}}"}}})
	if secret.status != http.StatusCreated || strings.Contains(string(secret.raw), value) {
		t.Fatalf("create secret: %d %s", secret.status, secret.raw)
	}
	s.putType(t, "keyed", map[string]any{"enabled": true, "tools": []string{"bash"}, "secrets": []string{"api-key"},
		"egress": map[string]any{"mode": "allowlist", "allow": []string{api.addr()}}})
	id, tok := s.createTyped(t, "keyed")

	if got := codeIn(s.bash(t, id, tok, "curl -s -o /dev/null -w 'code=%{http_code}' -H 'Authorization: Bearer forged' "+api.URL+"/v1/models")); got != "200" {
		t.Fatalf("the API call: %s", got)
	}
	if got := codeIn(s.bash(t, id, tok, "curl -s -o /dev/null -w 'code=%{http_code}' "+api.URL+"/health")); got != "200" {
		t.Fatalf("outside the rule's path: %s", got)
	}
	seen := api.headers()
	if len(seen) != 2 || seen[0].Get("Authorization") != "Bearer "+value || seen[1].Get("Authorization") != "" {
		t.Fatalf("the server saw %v", seen)
	}

	// Nothing the sandbox can read holds it: its environment, its
	// processes', the files of its sandbox folders (the workspace, the
	// launcher's private and network folders, the logs), the dev server's
	// work, /etc and /tmp. The value is put together in the shell, and the
	// processes are read before any command line holds it.
	out := s.bash(t, id, tok, `A=`+value[:6]+`; B=`+value[6:]+`; V="$A$B"; `+
		`echo "env+proc: $( (env; for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null | tr '\0' '\n'; done) | grep -c -F -f <(printf '%s\n' "$V"))"; `+
		`echo "files: $( (find "$WORKSPACE/.." `+s.work+` /etc -type f -size -4M 2>/dev/null; find /tmp -maxdepth 3 -type f -size -4M 2>/dev/null) | `+
		`xargs -r grep -lIF -e "$V" 2>/dev/null | wc -l)"`)
	if !strings.Contains(out, "env+proc: 0\n") || !strings.Contains(out, "files: 0\n") {
		t.Errorf("the sandbox found the secret: %s", out)
	}
	evs, err := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if raw, _ := json.Marshal(e); strings.Contains(string(raw), value) {
			t.Errorf("event %s holds the secret", e.Type)
		}
	}
	if l := s.call(http.MethodGet, "/api/v1/secrets", appKey, nil); l.status != http.StatusOK || strings.Contains(string(l.raw), value) || !strings.Contains(string(l.raw), `"api-key"`) {
		t.Errorf("list: %d %s", l.status, l.raw)
	}
	if strings.Contains(s.logs.String(), value) {
		t.Error("the dev server's logs hold the secret")
	}

	// Rotated, the next request carries the new value; deleted, none.
	if r := s.call(http.MethodPut, "/api/v1/secrets/api-key", appKey, map[string]any{"value": value + "-2",
		"inject": []map[string]any{{"host": "127.0.0.1", "header": "Authorization", "format": "Bearer {{value}}"}}}); r.status != http.StatusOK {
		t.Fatalf("rotate: %d %s", r.status, r.raw)
	}
	eventually(t, 10*time.Second, "the rotated value", func() bool {
		s.bash(t, id, tok, "curl -s -o /dev/null "+api.URL+"/v1/x")
		h := api.headers()
		return h[len(h)-1].Get("Authorization") == "Bearer "+value+"-2"
	})
	if r := s.call(http.MethodDelete, "/api/v1/secrets/api-key", appKey, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	wantError(t, s.call(http.MethodDelete, "/api/v1/secrets/api-key", appKey, nil), http.StatusNotFound, "secret_not_found")
	eventually(t, 10*time.Second, "no header once deleted", func() bool {
		s.bash(t, id, tok, "curl -s -o /dev/null "+api.URL+"/v1/x")
		h := api.headers()
		return h[len(h)-1].Get("Authorization") == ""
	})
}

// TestEgressServiceKnowsSandboxesByAddress runs the egress proxy as it
// runs on AWS (egressservice: one listener for every sandbox): a sandbox
// task's running event, through the jobs queue and the worker, records its
// address, and the proxy holds each request from that address to the
// session's policy, its refusals the session's events.
func TestEgressServiceKnowsSandboxesByAddress(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	allowed, other := record(t, "allowed"), record(t, "other")
	s.putType(t, "fenced", map[string]any{"enabled": true, "tools": []string{"bash"},
		"egress": map[string]any{"mode": "allowlist", "allow": []string{allowed.addr()}}})
	id, _ := s.createTyped(t, "fenced")
	sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := s.srv.Env.Jobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// What EventBridge sends when the task runs: here, at this test's own
	// address, the proxy's clients'.
	if err := jobs.Publish(t.Context(), jobqueue.Message{Type: jobqueue.TaskRunning, SessionID: id, Generation: sess.Generation, SandboxRef: sess.SandboxRef, Addr: "127.0.0.1"}, 0); err != nil {
		t.Fatal(err)
	}
	svc, err := egressservice.Build(t.Context(), s.srv.Env)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() { _ = svc.Serve(l) }()
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: l.Addr().String()}), DisableKeepAlives: true}}
	status := func(u string) int {
		res, err := c.Get(u)
		if err != nil {
			return 0
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	eventually(t, 20*time.Second, "the sandbox known by its address", func() bool { return status(allowed.URL+"/") == http.StatusOK })
	if got := status(other.URL + "/"); got != http.StatusForbidden {
		t.Errorf("another server: %d", got)
	}
	// The bucket sandboxes upload their outputs to by presigned URL is the
	// platform's: reached whatever the policy.
	up, err := s.srv.Env.Bucket().PresignPut(t.Context(), "egress-test/probe.txt", "text/plain", 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	put, err := http.NewRequestWithContext(t.Context(), http.MethodPut, up.URL, strings.NewReader("ok"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range up.Headers {
		put.Header.Set(k, v)
	}
	put.ContentLength = 2
	if res, err := c.Do(put); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("a presigned upload through the proxy: %v %v", res, err)
	} else {
		_ = res.Body.Close()
	}
	if rc, _, err := s.srv.Env.Bucket().Get(t.Context(), "egress-test/probe.txt"); err != nil {
		t.Errorf("the upload through the proxy is not in the bucket: %v", err)
	} else {
		_ = rc.Close()
	}
	eventually(t, 10*time.Second, "egress.denied on the session", func() bool {
		evs, err := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 1000)
		return err == nil && slices.ContainsFunc(evs, func(e session.Event) bool {
			return e.Type == sandboxwire.TypeEgressDenied && e.Data["host"] == "127.0.0.1"
		})
	})
}

// An agent created for an app's user (end_user) carries that user's secret
// of a name, another agent the app's own.
func TestEndUsersSecretsGoWithTheirAgents(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	api := record(t, "api")
	rule := []map[string]any{{"host": "127.0.0.1", "header": "X-Api-Key", "format": "{{value}}"}}
	for _, body := range []map[string]any{
		{"name": "key", "value": "app-value", "inject": rule},
		{"name": "key", "end_user": "alice@example.com", "value": "alice-value", "inject": rule},
	} {
		if r := s.call(http.MethodPost, "/api/v1/secrets", appKey, body); r.status != http.StatusCreated {
			t.Fatalf("create secret: %d %s", r.status, r.raw)
		}
	}
	if l := s.call(http.MethodGet, "/api/v1/secrets?end_user=alice@example.com", appKey, nil); l.status != http.StatusOK || !strings.Contains(string(l.raw), `"end_user":"alice@example.com"`) {
		t.Errorf("alice's secrets: %d %s", l.status, l.raw)
	}
	s.putType(t, "keyed", map[string]any{"enabled": true, "tools": []string{"bash"}, "secrets": []string{"key"},
		"egress": map[string]any{"mode": "allowlist", "allow": []string{api.addr()}}})
	for user, want := range map[string]string{"alice@example.com": "alice-value", "": "app-value"} {
		body := createBody("Hello")
		body["agent_type"] = "keyed"
		if user != "" {
			body["end_user"] = user
		}
		r := s.create(body)
		if r.status != http.StatusOK {
			t.Fatalf("create for %q: %d %s", user, r.status, r.raw)
		}
		before := len(api.headers())
		out := s.bash(t, r.str("agent_id"), r.str("session_token"), "curl -s -o /dev/null -w 'code=%{http_code}' "+api.URL+"/x")
		h := api.headers()
		if len(h) != before+1 {
			t.Fatalf("the agent for %q: %s; the server got %d requests", user, out, len(h)-before)
		}
		if got := h[len(h)-1].Get("X-Api-Key"); got != want {
			sess, _ := s.srv.Env.SessionStore().Get(t.Context(), r.str("agent_id"))
			t.Errorf("the agent for %q (session end user %q, %s) sent %q, want %q", user, sess.EndUser, sess.ID, got, want)
		}
	}
	wantError(t, s.create(map[string]any{"project_name": "demo", "persona_slug": "assistant", "initial_prompt": "Hi", "end_user": "../x"}), http.StatusBadRequest, "invalid_request")
}
