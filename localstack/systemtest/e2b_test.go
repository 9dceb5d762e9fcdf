package systemtest_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/remote-agents/remote-agents/api/envd/process"
	"github.com/remote-agents/remote-agents/api/envd/process/processconnect"
	"github.com/remote-agents/remote-agents/localstack/devtest"
	"github.com/remote-agents/remote-agents/shared/envdtoken"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// e2bCall calls the sandbox API as the E2B SDKs do: X-API-Key.
func (s *stack) e2bCall(method, path, key string, body any) reply {
	s.t.Helper()
	var headers []string
	if key != "" {
		headers = []string{"X-API-Key", key}
	}
	return s.call(method, "/e2b"+path, "", body, headers...)
}

// e2bError checks the sandbox API's error body: code, the HTTP status.
func e2bError(t *testing.T, r reply, status int) {
	t.Helper()
	if r.status != status || r.body["code"] != float64(status) || r.str("message") == "" {
		t.Errorf("got %d %s, want %d with {code: %d, message}", r.status, r.raw, status, status)
	}
}

// proxiedEnvd is a process client of sandbox id's envd through the sandbox
// proxy, as the SDKs reach it with E2B_SANDBOX_URL.
func (s *stack) proxiedEnvd(id, token string) processconnect.ProcessClient {
	return processconnect.NewProcessClient(http.DefaultClient, s.srv.SandboxProxyURL, connect.WithProtoJSON(),
		connect.WithInterceptors(sandboxHeaders{id, token}))
}

// sandboxHeaders names the sandbox and carries its access token.
type sandboxHeaders struct{ id, token string }

func (h sandboxHeaders) set(hd http.Header) {
	hd.Set("E2b-Sandbox-Id", h.id)
	hd.Set("E2b-Sandbox-Port", "49983")
	hd.Set("X-Access-Token", h.token)
}

func (h sandboxHeaders) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		h.set(req.Header())
		return next(ctx, req)
	}
}

func (h sandboxHeaders) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		h.set(conn.RequestHeader())
		return conn
	}
}

func (h sandboxHeaders) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// run runs cmd in bash through envd and returns its stdout and exit code.
func runIn(t *testing.T, c processconnect.ProcessClient, cmd string) (string, int32) {
	t.Helper()
	stream, err := c.Start(t.Context(), connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}}}))
	if err != nil {
		t.Fatalf("start %q: %v", cmd, err)
	}
	defer func() { _ = stream.Close() }()
	var out strings.Builder
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().GetEvent().(type) {
		case *pb.ProcessEvent_Data:
			out.Write(ev.Data.GetStdout())
		case *pb.ProcessEvent_End:
			return out.String(), ev.End.GetExitCode()
		}
	}
	t.Fatalf("%q: the stream ended without an end event: %v", cmd, stream.Err())
	return "", 0
}

// TestE2BSandboxLifecycle: the sandbox API as the E2B SDKs use it, over
// HTTP: create (v1 and v2), envd through the sandbox proxy with the access
// token create answered, info, the list's metadata filter, connect's
// extension, set timeout, pause (409 when paused), connect resuming (201)
// with the files kept, the end at the timeout, kill (404 once over).
func TestE2BSandboxLifecycle(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"), devtest.WithSandboxProxy())
	key := devtest.E2BKey

	e2bError(t, s.e2bCall(http.MethodPost, "/v2/sandboxes", "", map[string]any{"templateID": "base"}), http.StatusUnauthorized)
	e2bError(t, s.e2bCall(http.MethodPost, "/v2/sandboxes", "e2b_"+strings.Repeat("0", 40), map[string]any{"templateID": "base"}), http.StatusUnauthorized)
	e2bError(t, s.e2bCall(http.MethodPost, "/v2/sandboxes", key, map[string]any{"templateID": "base", "timeout": 0}), http.StatusBadRequest)
	e2bError(t, s.e2bCall(http.MethodPost, "/v2/sandboxes", key, map[string]any{"templateID": "no-such-type"}), http.StatusNotFound)

	// As 2.51 sends it: only what the user set; unknown fields ignored.
	began := time.Now()
	created := s.e2bCall(http.MethodPost, "/v2/sandboxes", key, map[string]any{"templateID": "base", "timeout": 120,
		"metadata": map[string]string{"user": "u 1&2", "app": "tests"}, "envVars": map[string]string{"GREETING": "hi there"},
		"network": map[string]any{"allowOut": []string{}}, "mcp": nil})
	if created.status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.status, created.raw)
	}
	id, tok := created.str("sandboxID"), created.str("envdAccessToken")
	if !session.ValidID(id) || !strings.HasPrefix(tok, envdtoken.Prefix) || created.str("envdVersion") != sandboxwire.EnvdVersion ||
		created.str("templateID") != "base" || created.str("clientID") == "" {
		t.Fatalf("create answered %s", created.raw)
	}

	envd := s.proxiedEnvd(id, tok)
	if out, code := runIn(t, envd, `echo "$GREETING" && echo kept > kept.txt`); out != "hi there\n" || code != 0 {
		t.Errorf("a command with the sandbox's envVars: %q, exit %d", out, code)
	}
	if _, err := s.proxiedEnvd(id, envdtoken.Random().Token(id)).List(t.Context(), connect.NewRequest(&pb.ListRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("another key's token: %v, want unauthenticated", err)
	}

	info := s.e2bCall(http.MethodGet, "/sandboxes/"+id, key, nil)
	end, _ := time.Parse(time.RFC3339Nano, info.str("endAt"))
	if info.status != http.StatusOK || info.str("state") != "running" || end.Before(began.Add(119*time.Second)) || end.After(time.Now().Add(121*time.Second)) {
		t.Errorf("info: %d %s", info.status, info.raw)
	}
	// A sandbox is one of the app's agents.
	if fl := s.call(http.MethodGet, "/api/remote_agents?alive=true", appKey, nil); !strings.Contains(fl.raw, id) {
		t.Errorf("the fleet list does not hold the sandbox: %s", fl.raw)
	}

	list := func(md map[string]string) []string {
		t.Helper()
		// As the SDKs encode it: each key and value, the pairs as a query,
		// the whole once more.
		pairs := url.Values{}
		for k, v := range md {
			pairs.Set(url.QueryEscape(k), url.QueryEscape(v))
		}
		r := s.e2bCall(http.MethodGet, "/v2/sandboxes?state=running,paused&metadata="+url.QueryEscape(pairs.Encode()), key, nil)
		var got []map[string]any
		if r.status != http.StatusOK || json.Unmarshal([]byte(r.raw), &got) != nil {
			t.Fatalf("list: %d %s", r.status, r.raw)
		}
		var ids []string
		for _, sb := range got {
			ids = append(ids, sb["sandboxID"].(string))
		}
		return ids
	}
	if got := list(map[string]string{"user": "u 1&2"}); len(got) != 1 || got[0] != id {
		t.Errorf("list by its metadata: %v", got)
	}
	if got := list(map[string]string{"user": "someone else"}); len(got) != 0 {
		t.Errorf("list by other metadata: %v", got)
	}

	endOf := func() time.Time {
		t.Helper()
		r := s.e2bCall(http.MethodGet, "/sandboxes/"+id, key, nil)
		at, err := time.Parse(time.RFC3339Nano, r.str("endAt"))
		if err != nil {
			t.Fatalf("info: %d %s", r.status, r.raw)
		}
		return at
	}
	// Connect extends, never shortens; it answers the same token.
	if c := s.e2bCall(http.MethodPost, "/sandboxes/"+id+"/connect", key, map[string]any{"timeout": 600}); c.status != http.StatusOK || c.str("envdAccessToken") != tok {
		t.Errorf("connect to a running sandbox: %d %s", c.status, c.raw)
	}
	extended := endOf()
	if extended.Before(time.Now().Add(590 * time.Second)) {
		t.Errorf("connect with 600 s: ends at %s", extended)
	}
	if c := s.e2bCall(http.MethodPost, "/v2/sandboxes/"+id+"/connect", key, map[string]any{"timeout": 10}); c.status != http.StatusOK {
		t.Errorf("connect: %d %s", c.status, c.raw)
	}
	if got := endOf(); !got.Equal(extended) {
		t.Errorf("a connect with a shorter timeout moved the end from %s to %s", extended, got)
	}

	// Pause (2.45's body), then a second pause is 409.
	if p := s.e2bCall(http.MethodPost, "/sandboxes/"+id+"/pause", key, map[string]any{"memory": true}); p.status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", p.status, p.raw)
	}
	e2bError(t, s.e2bCall(http.MethodPost, "/sandboxes/"+id+"/pause", key, nil), http.StatusConflict)
	if info := s.e2bCall(http.MethodGet, "/sandboxes/"+id, key, nil); info.str("state") != "paused" {
		t.Errorf("info of a paused sandbox: %s", info.raw)
	}
	if _, err := envd.List(t.Context(), connect.NewRequest(&pb.ListRequest{})); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("a paused sandbox's envd: %v, want unavailable (502)", err)
	}
	// Connect resumes it: 201, its files there. A resume slower than the
	// connect's wait (a loaded machine) is 503 "connect again": sent again,
	// as the SDK's caller would.
	c := s.e2bCall(http.MethodPost, "/v2/sandboxes/"+id+"/connect", key, map[string]any{})
	for tries := 0; c.status == http.StatusServiceUnavailable && tries < 6; tries++ {
		c = s.e2bCall(http.MethodPost, "/v2/sandboxes/"+id+"/connect", key, map[string]any{})
	}
	if c.status != http.StatusCreated || c.str("envdAccessToken") != tok {
		t.Fatalf("connect to a paused sandbox: %d %s", c.status, c.raw)
	}
	if out, code := runIn(t, envd, "cat kept.txt; exit 3"); out != "kept\n" || code != 3 {
		t.Errorf("after the resume: %q, exit %d", out, code)
	}

	// Its end: one second from now, then it is over.
	if r := s.e2bCall(http.MethodPost, "/sandboxes/"+id+"/timeout", key, map[string]any{"timeout": 1}); r.status != http.StatusNoContent {
		t.Fatalf("set timeout: %d %s", r.status, r.raw)
	}
	eventually(t, 30*time.Second, "the sandbox ended at its timeout", func() bool {
		sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
		return err == nil && sess.State == session.Ended && sess.Reason == session.ReasonTimeout
	})
	e2bError(t, s.e2bCall(http.MethodGet, "/sandboxes/"+id, key, nil), http.StatusNotFound)
	e2bError(t, s.e2bCall(http.MethodDelete, "/sandboxes/"+id, key, nil), http.StatusNotFound)
	e2bError(t, s.e2bCall(http.MethodPost, "/sandboxes/"+id+"/connect", key, map[string]any{"timeout": 60}), http.StatusNotFound)

	// 2.45's create, then kill.
	other := s.e2bCall(http.MethodPost, "/sandboxes", key, map[string]any{"templateID": "base", "timeout": 300, "secure": true, "allow_internet_access": true})
	if other.status != http.StatusCreated {
		t.Fatalf("create (v1): %d %s", other.status, other.raw)
	}
	oid := other.str("sandboxID")
	if r := s.e2bCall(http.MethodDelete, "/sandboxes/"+oid, key, nil); r.status != http.StatusNoContent {
		t.Errorf("kill: %d %s", r.status, r.raw)
	}
	e2bError(t, s.e2bCall(http.MethodGet, "/sandboxes/"+oid, key, nil), http.StatusNotFound)
	e2bError(t, s.e2bCall(http.MethodGet, "/sandboxes/not-an-id", key, nil), http.StatusNotFound)
	// An agent made by create is no sandbox of the sandbox API.
	agent, _ := s.mustCreate()
	e2bError(t, s.e2bCall(http.MethodGet, "/sandboxes/"+agent, key, nil), http.StatusNotFound)
}

// serveIn starts a web server in the sandbox, on a loopback port of its
// choosing, serving its workspace, and returns the port.
func serveIn(t *testing.T, envd processconnect.ProcessClient) string {
	t.Helper()
	out, code := runIn(t, envd, `echo "preview $RANDOM" > index.html && cat index.html > want.txt
python3 -c '
import http.server
s = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
print(s.server_address[1], flush=True)
s.serve_forever()' > port.txt 2> /dev/null &
until [ -s port.txt ]; do sleep 0.05; done; cat port.txt`)
	if code != 0 || strings.TrimSpace(out) == "" {
		t.Fatalf("a web server in the sandbox: %q, exit %d", out, code)
	}
	return strings.TrimSpace(out)
}

// preview GETs / of port of sandbox id through the sandbox proxy (named
// by headers, or by host when byHost), with headers (name, value...).
func (s *stack) preview(id, port string, byHost bool, headers ...string) (int, string) {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.t.Context(), http.MethodGet, s.srv.SandboxProxyURL+"/", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	if byHost {
		req.Host = port + "-" + id + ".sandboxes.example"
	} else {
		req.Header.Set("E2b-Sandbox-Id", id)
		req.Header.Set("E2b-Sandbox-Port", port)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// TestE2BPreviewURLs: a port the sandbox listens on (loopback only) is
// reached through the sandbox proxy, by headers or by host, through envd's
// port. A sandbox created with public traffic (E2B's default) serves its
// previews to anyone; one with allowPublicTraffic false only with its
// traffic access token (create answers it) or its access token. An agent
// made otherwise has no public previews; a paused sandbox's are 502, and a
// port nothing listens on is 502.
func TestE2BPreviewURLs(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"), devtest.WithSandboxProxy())
	key := devtest.E2BKey

	public := s.e2bCall(http.MethodPost, "/v2/sandboxes", key, map[string]any{"templateID": "base"})
	if public.status != http.StatusCreated || public.body["trafficAccessToken"] != nil {
		t.Fatalf("create: %d %s", public.status, public.raw)
	}
	id := public.str("sandboxID")
	envd := s.proxiedEnvd(id, public.str("envdAccessToken"))
	port := serveIn(t, envd)
	want, _ := runIn(t, envd, "cat want.txt")
	for _, byHost := range []bool{false, true} {
		if status, body := s.preview(id, port, byHost); status != http.StatusOK || body != want {
			t.Errorf("a public preview (by host: %v): %d %q, want %q", byHost, status, body, want)
		}
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, closed, _ := net.SplitHostPort(free.Addr().String())
	_ = free.Close()
	if status, body := s.preview(id, closed, false); status != http.StatusBadGateway || !strings.Contains(body, "nothing answers on port "+closed) || strings.Contains(body, ".sock") {
		t.Errorf("a port nothing listens on: %d %s, want 502 saying so (and not how the sandbox is reached)", status, body)
	}

	private := s.e2bCall(http.MethodPost, "/v2/sandboxes", key, map[string]any{"templateID": "base", "network": map[string]any{"allowPublicTraffic": false}})
	traffic := private.str("trafficAccessToken")
	if private.status != http.StatusCreated || !strings.HasPrefix(traffic, envdtoken.TrafficPrefix) {
		t.Fatalf("create with private traffic: %d %s", private.status, private.raw)
	}
	pid, ptok := private.str("sandboxID"), private.str("envdAccessToken")
	penvd := s.proxiedEnvd(pid, ptok)
	pport := serveIn(t, penvd)
	pwant, _ := runIn(t, penvd, "cat want.txt")
	for _, c := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"no token", nil, http.StatusUnauthorized},
		{"another sandbox's traffic token", []string{"E2b-Traffic-Access-Token", envdtoken.Random().TrafficToken(pid)}, http.StatusUnauthorized},
		{"its access token as a traffic token", []string{"E2b-Traffic-Access-Token", ptok}, http.StatusUnauthorized},
		{"its traffic token", []string{"E2b-Traffic-Access-Token", traffic}, http.StatusOK},
		{"its access token", []string{"X-Access-Token", ptok}, http.StatusOK},
	} {
		status, body := s.preview(pid, pport, true, c.headers...)
		if status != c.status || (status == http.StatusOK && body != pwant) {
			t.Errorf("a private preview with %s: %d %q, want %d", c.name, status, body, c.status)
		}
	}
	// Its traffic token opens its previews, not its envd.
	if status, _ := s.preview(pid, "49983", false, "E2b-Traffic-Access-Token", traffic); status != http.StatusUnauthorized {
		t.Errorf("envd with the traffic token: %d, want 401", status)
	}

	// An agent made by create has no public previews.
	agent, _ := s.mustCreate()
	if status, _ := s.preview(agent, port, false); status != http.StatusUnauthorized {
		t.Errorf("an agent's preview without a token: %d, want 401", status)
	}

	// Paused: 502, and a visit does not wake it.
	if p := s.e2bCall(http.MethodPost, "/sandboxes/"+id+"/pause", key, nil); p.status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", p.status, p.raw)
	}
	if status, _ := s.preview(id, port, true); status != http.StatusBadGateway {
		t.Errorf("a paused sandbox's preview: %d, want 502", status)
	}
	if info := s.e2bCall(http.MethodGet, "/sandboxes/"+id, key, nil); info.str("state") != "paused" {
		t.Errorf("after a visit to its preview: %s", info.raw)
	}
}
