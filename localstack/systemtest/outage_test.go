package systemtest_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/localstack/devtest"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
)

// The outage tests are not parallel: each points the dev server's AWS
// endpoints (process environment) at links it can cut.

// link is a TCP relay on loopback in front of one AWS endpoint. Cut, its port
// is closed and every connection through it dropped: the service is down as a
// client sees it (connection refused). Mended, it listens on the same port again.
type link struct {
	t      testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newLink(t testing.TB, endpoint string) *link {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		t.Fatalf("endpoint %q: %v", endpoint, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &link{t: t, target: u.Host, addr: ln.Addr().String(), conns: map[net.Conn]bool{}}
	l.serve(ln)
	t.Cleanup(l.cut)
	return l
}

func (l *link) url() string { return "http://" + l.addr }

func (l *link) serve(ln net.Listener) {
	l.mu.Lock()
	l.ln = ln
	l.mu.Unlock()
	l.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.wg.Go(func() { l.relay(c) })
		}
	})
}

func (l *link) relay(c net.Conn) {
	up, err := net.Dial("tcp", l.target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !l.track(c, up) {
		_ = c.Close()
		_ = up.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
	l.mu.Lock()
	delete(l.conns, c)
	delete(l.conns, up)
	l.mu.Unlock()
}

// track records a relayed connection, unless the link was cut meanwhile.
func (l *link) track(conns ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln == nil {
		return false
	}
	for _, c := range conns {
		l.conns[c] = true
	}
	return true
}

// cut closes the port and every connection through it, and returns once
// nothing is relayed any more.
func (l *link) cut() {
	l.mu.Lock()
	if l.ln != nil {
		_ = l.ln.Close()
		l.ln = nil
	}
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// mend listens on the link's port again.
func (l *link) mend() {
	l.t.Helper()
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		l.t.Fatalf("listen again on %s: %v", l.addr, err)
	}
	l.serve(ln)
}

// outage is a dev server whose DynamoDB, SQS and S3 can be cut.
type outage struct {
	*stack
	links map[string]*link
}

// startOutage starts a dev server whose AWS endpoints go through links, each
// call tried once (an outage is answered at once, not after the SDK's retries).
func startOutage(t *testing.T, opts ...option) *outage {
	t.Helper()
	links := map[string]*link{}
	for name, svc := range map[string]awsconfig.Service{
		devserver.DependencyDynamoDB: awsconfig.DynamoDB,
		devserver.DependencySQS:      awsconfig.SQS,
		devserver.DependencyS3:       awsconfig.S3,
	} {
		links[name] = newLink(t, awsconfig.Endpoint(svc))
		t.Setenv("AWS_ENDPOINT_URL_"+string(svc), links[name].url())
	}
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	return &outage{stack: start(t, opts...), links: links}
}

// wantUnavailable checks a 503 service_unavailable envelope a client may retry.
func wantUnavailable(t *testing.T, what string, r reply) {
	t.Helper()
	if r.status != http.StatusServiceUnavailable || r.str("error_code") != "service_unavailable" || r.body["retryable"] != true ||
		r.body["status"] != float64(503) || r.str("message") == "" {
		t.Errorf("%s: got %d %s, want 503 service_unavailable, retryable", what, r.status, r.raw)
		return
	}
	if secs, _ := r.body["retry_after_seconds"].(float64); secs <= 0 || r.headers.Get("Retry-After") == "" {
		t.Errorf("%s: no retry_after_seconds / Retry-After: %v %s", what, r.headers, r.raw)
	}
	if strings.Contains(r.raw, "127.0.0.1") || strings.Contains(r.raw, "dial") || strings.Contains(r.raw, "refused") {
		t.Errorf("%s: the cause leaks to the client: %s", what, r.raw)
	}
}

// wantE2BUnavailable is wantUnavailable for the sandbox API, whose error
// body is E2B's: {code, message}, with the platform's error_code.
func wantE2BUnavailable(t *testing.T, what string, r reply) {
	t.Helper()
	if r.status != http.StatusServiceUnavailable || r.body["code"] != float64(503) || r.str("error_code") != "service_unavailable" || r.str("message") == "" {
		t.Errorf("%s: got %d %s, want 503 {code: 503, message, error_code: service_unavailable}", what, r.status, r.raw)
		return
	}
	if r.headers.Get("Retry-After") == "" {
		t.Errorf("%s: no Retry-After: %v", what, r.headers)
	}
	if strings.Contains(r.raw, "127.0.0.1") || strings.Contains(r.raw, "dial") || strings.Contains(r.raw, "refused") {
		t.Errorf("%s: the cause leaks to the client: %s", what, r.raw)
	}
}

// outageHook is an endpoint id of the right form (the outage comes before
// any read of it).
const outageHook = "wh_aaaaaaaaaaaaaaaaaaaaaaaaaa"

// TestDynamoDBOutageAnswers503OnEveryRoute: with DynamoDB down, every route of
// the table answers 503 service_unavailable, retryable, with a retry delay,
// and none a 500; once it is back, they work again.
func TestDynamoDBOutageAnswers503OnEveryRoute(t *testing.T) {
	o := startOutage(t)
	id, tok, sb := o.storedAgent(t)
	requests := map[string]func() reply{
		"POST /api/remote_agents/create": func() reply {
			return o.create(createBody("Hello"), "Idempotency-Key", "outage-create")
		},
		"GET /api/remote_agents/{id}/alive":     func() reply { return o.alive(id, tok) },
		"POST /api/remote_agents/{id}/shutdown": func() reply { return o.shutdown(id, tok) },
		"GET /api/remote_agents":                func() reply { return o.call(http.MethodGet, "/api/remote_agents", appKey, nil) },
		"POST /api/remote_agents/{id}/kill": func() reply {
			return o.call(http.MethodPost, "/api/remote_agents/"+id+"/kill", tok, nil)
		},
		"PATCH /api/remote_agents/{id}/egress": func() reply {
			return o.call(http.MethodPatch, "/api/remote_agents/"+id+"/egress", tok, map[string]any{"mode": "none"})
		},
		"POST /api/v1/secrets": func() reply {
			return o.call(http.MethodPost, "/api/v1/secrets", appKey, map[string]any{"name": "k", "value": "v",
				"inject": []map[string]any{{"host": "api.example.com", "header": "Authorization", "format": "Bearer {{value}}"}}})
		},
		"GET /api/v1/secrets": func() reply { return o.call(http.MethodGet, "/api/v1/secrets", appKey, nil) },
		"PUT /api/v1/secrets/{name}": func() reply {
			return o.call(http.MethodPut, "/api/v1/secrets/k", appKey, map[string]any{"value": "v",
				"inject": []map[string]any{{"host": "api.example.com", "header": "Authorization", "format": "Bearer {{value}}"}}})
		},
		"DELETE /api/v1/secrets/{name}": func() reply { return o.call(http.MethodDelete, "/api/v1/secrets/k", appKey, nil) },
		"POST /api/v1/webhooks": func() reply {
			return o.call(http.MethodPost, "/api/v1/webhooks", appKey, map[string]any{"url": "http://127.0.0.1:9/hooks", "events": []string{"*"}})
		},
		"GET /api/v1/webhooks":      func() reply { return o.call(http.MethodGet, "/api/v1/webhooks", appKey, nil) },
		"GET /api/v1/webhooks/{id}": func() reply { return o.call(http.MethodGet, "/api/v1/webhooks/"+outageHook, appKey, nil) },
		"PATCH /api/v1/webhooks/{id}": func() reply {
			return o.call(http.MethodPatch, "/api/v1/webhooks/"+outageHook, appKey, map[string]any{"disabled": true})
		},
		"DELETE /api/v1/webhooks/{id}":      func() reply { return o.call(http.MethodDelete, "/api/v1/webhooks/"+outageHook, appKey, nil) },
		"POST /api/v1/webhooks/{id}/rotate": func() reply { return o.call(http.MethodPost, "/api/v1/webhooks/"+outageHook+"/rotate", appKey, nil) },
		"GET /api/v1/webhooks/{id}/deliveries": func() reply {
			return o.call(http.MethodGet, "/api/v1/webhooks/"+outageHook+"/deliveries", appKey, nil)
		},
		"POST /api/v1/webhooks/{id}/replay": func() reply {
			return o.call(http.MethodPost, "/api/v1/webhooks/"+outageHook+"/replay", appKey, map[string]any{"from_sequence": 1, "agent_id": id})
		},
		"POST /api/remote_agents/{id}/messages": func() reply {
			return o.call(http.MethodPost, "/api/remote_agents/"+id+"/messages", tok, map[string]any{"text": "hi"})
		},
		"POST /api/remote_agents/{id}/attachments": func() reply {
			return o.call(http.MethodPost, "/api/remote_agents/"+id+"/attachments", tok, map[string]any{"name": "a.txt", "size_bytes": 3})
		},
		"POST /api/remote_agents/{id}/env": func() reply {
			return o.call(http.MethodPost, "/api/remote_agents/"+id+"/env", tok, map[string]any{"values": map[string]string{"A": "b"}})
		},
		"GET /api/remote_agents/{id}/events": func() reply {
			return o.call(http.MethodGet, "/api/remote_agents/"+id+"/events", tok, nil)
		},
		"POST /proliferate/{sessionId}/tools/{toolName}": func() reply {
			return o.call(http.MethodPost, "/proliferate/"+id+"/tools/verify", sb, map[string]any{"tool_call_id": "c1", "args": map[string]any{}})
		},
		"POST /sandbox/{sessionId}/bootstrap": func() reply {
			code, _ := token.New(token.Bootstrap)
			return o.call(http.MethodPost, "/sandbox/"+id+"/bootstrap", code, nil)
		},
		"POST /sandbox-pool/{sandboxId}/bootstrap": func() reply {
			code, _ := token.New(token.Bootstrap)
			return o.call(http.MethodPost, "/sandbox-pool/pool-"+id+"/bootstrap", code, nil)
		},
		"POST /sandbox-pool/{sandboxId}/heartbeat": func() reply {
			key, _ := token.New(token.Bootstrap)
			return o.call(http.MethodPost, "/sandbox-pool/pool-"+id+"/heartbeat", key, map[string]any{"idle": true})
		},
		"GET /sandbox/{sessionId}/spec": func() reply { return o.call(http.MethodGet, "/sandbox/"+id+"/spec", sb, nil) },
		"POST /sandbox/{sessionId}/status": func() reply {
			return o.call(http.MethodPost, "/sandbox/"+id+"/status", sb, map[string]any{"state": "working"})
		},
		"POST /sandbox/{sessionId}/heartbeat": func() reply {
			return o.call(http.MethodPost, "/sandbox/"+id+"/heartbeat", sb, nil)
		},
		"GET /sandbox/{sessionId}/inbox": func() reply { return o.call(http.MethodGet, "/sandbox/"+id+"/inbox", sb, nil) },
		"POST /sandbox/{sessionId}/events": func() reply {
			return o.call(http.MethodPost, "/sandbox/"+id+"/events", sb, map[string]any{"events": []any{map[string]any{"type": "agent.message", "data": map[string]any{"text": "x"}}}})
		},
		"POST /sandbox/{sessionId}/deltas": func() reply {
			return o.call(http.MethodPost, "/sandbox/"+id+"/deltas", sb, map[string]any{"deltas": []any{map[string]any{"type": "agent.message.delta", "data": map[string]any{"message_id": "m", "offset": 0, "text": "x"}}}})
		},
		"POST /sandbox/{sessionId}/model/{provider}/{proxy+}": func() reply {
			return o.call(http.MethodPost, "/sandbox/"+id+"/model/anthropic/v1/messages", sb, map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 5})
		},
		"POST /api/v1/agent-types": func() reply {
			return o.call(http.MethodPost, "/api/v1/agent-types", appKey, map[string]any{"id": "coder", "name": "Coder"})
		},
		"GET /api/v1/agent-types": func() reply { return o.call(http.MethodGet, "/api/v1/agent-types", appKey, nil) },
		"GET /api/v1/usage":       func() reply { return o.call(http.MethodGet, "/api/v1/usage", appKey, nil) },
		"GET /api/v1/limits":      func() reply { return o.call(http.MethodGet, "/api/v1/limits", appKey, nil) },
		"PUT /api/v1/limits": func() reply {
			return o.call(http.MethodPut, "/api/v1/limits", appKey, map[string]any{"max_cost_usd_per_day": 5})
		},
		"GET /api/v1/agent-types/{id}": func() reply { return o.call(http.MethodGet, "/api/v1/agent-types/default", appKey, nil) },
		"GET /api/v1/agent-types/{id}/workspace-config": func() reply {
			return o.call(http.MethodGet, "/api/v1/agent-types/default/workspace-config", appKey, nil)
		},
		"PUT /api/v1/agent-types/{id}/workspace-config": func() reply {
			return o.call(http.MethodPut, "/api/v1/agent-types/coder/workspace-config", appKey, map[string]any{"enabled": true})
		},
		"POST /api/remote_agents/{id}/workspace/tools/{tool}": func() reply {
			return o.call(http.MethodPost, "/api/remote_agents/"+id+"/workspace/tools/read", tok, map[string]any{"args": map[string]any{"path": "a.txt"}})
		},
		"POST /sandbox/{sessionId}/tool-results": func() reply {
			return o.call(http.MethodPost, "/sandbox/"+id+"/tool-results", sb, map[string]any{"request_id": "r1", "tool": "read", "output": "a", "is_error": false})
		},
		"POST /api/remote_agents/{id}/pause":      func() reply { return o.call(http.MethodPost, "/api/remote_agents/"+id+"/pause", tok, nil) },
		"POST /api/remote_agents/{id}/resume":     func() reply { return o.call(http.MethodPost, "/api/remote_agents/"+id+"/resume", tok, nil) },
		"GET /api/remote_agents/{id}/checkpoints": func() reply { return o.call(http.MethodGet, "/api/remote_agents/"+id+"/checkpoints", tok, nil) },
		"POST /api/remote_agents/{id}/fork":       func() reply { return o.call(http.MethodPost, "/api/remote_agents/"+id+"/fork", tok, nil) },
		"POST /sandbox/{sessionId}/checkpoints/uploads": func() reply {
			return o.call(http.MethodPost, "/sandbox/"+id+"/checkpoints/uploads", sb, map[string]any{"chunks": []any{map[string]any{"hash": strings.Repeat("a", 64), "size": 1}}})
		},
		"POST /sandbox/{sessionId}/checkpoints/downloads": func() reply {
			return o.call(http.MethodPost, "/sandbox/"+id+"/checkpoints/downloads", sb, map[string]any{"hashes": []string{strings.Repeat("a", 64)}})
		},
		"POST /sandbox/{sessionId}/checkpoints": func() reply {
			return o.call(http.MethodPost, "/sandbox/"+id+"/checkpoints", sb, map[string]any{"manifest": map[string]any{"hash": strings.Repeat("a", 64), "size": 1}, "reason": "periodic"})
		},
		"POST /e2b/sandboxes": func() reply {
			return o.e2bCall(http.MethodPost, "/sandboxes", devtest.E2BKey, map[string]any{"templateID": "base"})
		},
		"POST /e2b/v2/sandboxes": func() reply {
			return o.e2bCall(http.MethodPost, "/v2/sandboxes", devtest.E2BKey, map[string]any{"templateID": "base"})
		},
		"GET /e2b/v2/sandboxes": func() reply { return o.e2bCall(http.MethodGet, "/v2/sandboxes", devtest.E2BKey, nil) },
		"GET /e2b/sandboxes/{id}": func() reply {
			return o.e2bCall(http.MethodGet, "/sandboxes/"+id, devtest.E2BKey, nil)
		},
		"DELETE /e2b/sandboxes/{id}": func() reply {
			return o.e2bCall(http.MethodDelete, "/sandboxes/"+id, devtest.E2BKey, nil)
		},
		"POST /e2b/sandboxes/{id}/connect": func() reply {
			return o.e2bCall(http.MethodPost, "/sandboxes/"+id+"/connect", devtest.E2BKey, map[string]any{"timeout": 60})
		},
		"POST /e2b/v2/sandboxes/{id}/connect": func() reply {
			return o.e2bCall(http.MethodPost, "/v2/sandboxes/"+id+"/connect", devtest.E2BKey, nil)
		},
		"POST /e2b/sandboxes/{id}/timeout": func() reply {
			return o.e2bCall(http.MethodPost, "/sandboxes/"+id+"/timeout", devtest.E2BKey, map[string]any{"timeout": 60})
		},
		"POST /e2b/sandboxes/{id}/pause": func() reply {
			return o.e2bCall(http.MethodPost, "/sandboxes/"+id+"/pause", devtest.E2BKey, nil)
		},
		"GET /e2b/sandboxes/{id}/metrics": func() reply {
			return o.e2bCall(http.MethodGet, "/sandboxes/"+id+"/metrics", devtest.E2BKey, nil)
		},
		"POST /sandbox/{sessionId}/uploads": func() reply {
			return o.call(http.MethodPost, "/sandbox/"+id+"/uploads", sb, map[string]any{"tool": "verify", "tool_call_id": "c1", "files": []any{map[string]any{"path": "a.txt", "size_bytes": 1}}})
		},
	}
	// The orchestrator's routes, signed.
	orch := newOrchestrator(o.stack)
	step, job := uuid.NewString(), uuid.NewString()
	agent := orch.putProfile(t, step)
	for key, path := range map[string]string{
		"GET /internal/jobs/{id}": "/internal/jobs/" + job, "GET /internal/jobs/{id}/logs": "/internal/jobs/" + job + "/logs",
		"GET /internal/jobs/{id}/outputs": "/internal/jobs/" + job + "/outputs", "GET /internal/agents/{id}": "/internal/agents/" + agent,
		"GET /internal/agents": "/internal/agents",
	} {
		requests[key] = func() reply { return orch.call(http.MethodGet, path, nil, step) }
	}
	requests["POST /internal/jobs"] = func() reply { return orch.call(http.MethodPost, "/internal/jobs", orch.jobBody(agent, step, 10), step) }
	requests["POST /internal/jobs/{id}/cancel"] = func() reply { return orch.call(http.MethodPost, "/internal/jobs/"+job+"/cancel", nil, step) }
	requests["POST /internal/jobs/{id}/retry"] = func() reply { return orch.call(http.MethodPost, "/internal/jobs/"+job+"/retry", nil, step) }
	requests["GET /internal/jobs/{id}/logs/stream"] = func() reply {
		streams := *orch
		streams.service = "lambda" // its function URL's
		return streams.call(http.MethodGet, "/internal/jobs/"+job+"/logs/stream", nil, step)
	}
	requests["PUT /internal/agents/{id}"] = func() reply {
		return orch.call(http.MethodPut, "/internal/agents/"+agent, map[string]any{"name": "W", "agent_level": "L0", "llm_provider": "openai",
			"llm_model": "gpt-4o", "max_tokens": 10, "allowed_skills": []string{}}, step)
	}

	o.links[devserver.DependencyDynamoDB].cut()
	for _, r := range routes.All() {
		if r.Key() == "GET /embed/{id}" {
			// A page for browsers: the status and the retry delay, in HTML.
			page := o.call(http.MethodGet, "/embed/"+id+"?token="+url.QueryEscape(tok), "", nil)
			if page.status != http.StatusServiceUnavailable || page.headers.Get("Retry-After") == "" || !strings.Contains(page.raw, "reload the page") {
				t.Errorf("embed: %d %v %s", page.status, page.headers, page.raw)
			}
			continue
		}
		request, ok := requests[r.Key()]
		if !ok {
			t.Errorf("no outage case for %s", r.Key())
			continue
		}
		if strings.HasPrefix(r.Path, routes.E2BPrefix+"/") {
			wantE2BUnavailable(t, r.Key(), request())
			continue
		}
		wantUnavailable(t, r.Key(), request())
	}

	o.links[devserver.DependencyDynamoDB].mend()
	if r := o.alive(id, tok); r.status != http.StatusOK || r.body["alive"] != true {
		t.Errorf("alive once DynamoDB is back: %d %s", r.status, r.raw)
	}
	if r := o.call(http.MethodPost, "/api/remote_agents/"+id+"/messages", tok, map[string]any{"text": "hi"}); r.status != http.StatusOK {
		t.Errorf("message once DynamoDB is back: %d %s", r.status, r.raw)
	}
}

// TestHealthzNamesTheFailingDependency: /healthz checks DynamoDB, SQS and S3,
// and answers 503 naming the one that is down.
func TestHealthzNamesTheFailingDependency(t *testing.T) {
	o := startOutage(t)
	health := func() reply { return o.call(http.MethodGet, "/healthz", "", nil) }
	if r := health(); r.status != http.StatusOK || r.body["ok"] != true {
		t.Fatalf("healthy: %d %s", r.status, r.raw)
	}
	for _, name := range []string{devserver.DependencyDynamoDB, devserver.DependencySQS, devserver.DependencyS3} {
		o.links[name].cut()
		r := health()
		var got devserver.Health
		if err := json.Unmarshal([]byte(r.raw), &got); err != nil {
			t.Fatalf("%s down: %v %s", name, err, r.raw)
		}
		if r.status != http.StatusServiceUnavailable || got.OK || len(got.Failing) != 1 || got.Failing[0] != name ||
			got.Dependencies[name].OK || got.Dependencies[name].Error != "unavailable" || len(got.Dependencies) != 3 {
			t.Errorf("%s down: %d %s", name, r.status, r.raw)
		}
		if got.Envelope == nil || got.ErrorCode != "service_unavailable" || !got.Retryable || !strings.Contains(got.Message, name) {
			t.Errorf("%s down: envelope %s", name, r.raw)
		}
		o.links[name].mend()
		if r := health(); r.status != http.StatusOK || r.body["ok"] != true {
			t.Errorf("%s back: %d %s", name, r.status, r.raw)
		}
	}
}

// rawStream is an event stream read as text, to its end.
type rawStream struct {
	first string
	rest  chan string
}

func (o *outage) stream(t *testing.T, ctx context.Context, id, tok string) rawStream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.srv.URL+"/api/remote_agents/"+id+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("events: %d", res.StatusCode)
	}
	buf := make([]byte, 64)
	n, err := res.Body.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	out := rawStream{first: string(buf[:n]), rest: make(chan string, 1)}
	go func() {
		defer func() { _ = res.Body.Close() }()
		b, _ := io.ReadAll(res.Body)
		out.rest <- string(b)
	}()
	return out
}

// TestEventStreamEndsWithRetryHintWhenStoreIsDown: an open stream whose
// events cannot be read does not idle on: it ends, telling the client when
// to reconnect.
func TestEventStreamEndsWithRetryHintWhenStoreIsDown(t *testing.T) {
	o := startOutage(t)
	id, tok, _ := o.storedAgent(t)
	// A stream that idled on would outlive this; it is a bound, not a wait.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st := o.stream(t, ctx, id, tok)
	if !strings.HasPrefix(st.first, "retry: 1000") {
		t.Fatalf("stream opened with %q", st.first)
	}
	o.links[devserver.DependencyDynamoDB].cut()
	rest := <-st.rest
	if ctx.Err() != nil {
		t.Fatalf("the stream did not end while the store was down: %q", rest)
	}
	if !strings.Contains(rest, "retry: 5000\n") || !strings.Contains(rest, "event: unavailable\n") {
		t.Fatalf("stream ended with %q, want a retry hint and an unavailable event", rest)
	}
	_, data, _ := strings.Cut(rest, "event: unavailable\ndata: ")
	data, _, _ = strings.Cut(data, "\n")
	var env map[string]any
	if err := json.Unmarshal([]byte(data), &env); err != nil || env["error_code"] != "service_unavailable" || env["retryable"] != true || env["retry_after_seconds"] != float64(5) {
		t.Errorf("unavailable event data %q: %v", data, err)
	}
}

// TestShutdownWhosePublishFailedIsFinishedByARetry: a shutdown whose stop
// cannot be queued answers 503; the session is ending, and a retry once the
// queue is back queues the stop, which ends the session.
func TestShutdownWhosePublishFailedIsFinishedByARetry(t *testing.T) {
	o := startOutage(t)
	id, tok, _ := o.storedAgent(t)
	o.links[devserver.DependencySQS].cut()
	wantUnavailable(t, "shutdown with SQS down", o.shutdown(id, tok))
	if r := o.alive(id, tok); r.str("state") != "ending" {
		t.Fatalf("after the failed shutdown: %s", r.raw)
	}
	o.links[devserver.DependencySQS].mend()
	if r := o.shutdown(id, tok); r.status != http.StatusOK || r.str("status") != "shutdown_initiated" {
		t.Fatalf("retried shutdown: %d %s", r.status, r.raw)
	}
	// The stop comes after session.StopGrace; the stream ends with the session.
	ctx, cancel := context.WithTimeout(t.Context(), session.StopGrace+30*time.Second)
	defer cancel()
	st := o.stream(t, ctx, id, tok)
	rest := <-st.rest
	if ctx.Err() != nil || !strings.Contains(rest, "event: end\n") {
		t.Fatalf("the session did not end after the retried shutdown: %q", rest)
	}
	if r := o.alive(id, tok); r.str("state") != "ended" || r.body["alive"] != false {
		t.Errorf("after the stop: %s", r.raw)
	}
}

// TestCreateWhoseStartFailedIsResumedByARetry: a create whose start cannot be
// queued answers 503, retryable, and a retry with the same Idempotency-Key
// once the queue is back starts that agent (not a 409 for a failed one).
func TestCreateWhoseStartFailedIsResumedByARetry(t *testing.T) {
	o := startOutage(t)
	o.links[devserver.DependencySQS].cut()
	wantUnavailable(t, "create with SQS down", o.create(createBody("Hello"), "Idempotency-Key", "start-later"))
	o.links[devserver.DependencySQS].mend()
	r := o.create(createBody("Hello"), "Idempotency-Key", "start-later")
	if r.status != http.StatusOK || r.str("status") != "ready" {
		t.Fatalf("create retried once SQS is back: %d %s", r.status, r.raw)
	}
}
