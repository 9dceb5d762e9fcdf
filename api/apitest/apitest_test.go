package apitest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// The document is valid OpenAPI 3.1 (kin-openapi's checks, with JSON Schema
// 2020-12 for its schemas).
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi is %q, want 3.1.0", doc.OpenAPI)
	}
}

// The document describes exactly the route table: every route, no other
// path or method.
func TestDocumentDescribesTheRouteTable(t *testing.T) {
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, r := range routes.All() {
		want = append(want, r.Method+" "+DocPath(r.Path))
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			got = append(got, method+" "+path)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Errorf("the document describes\n%v\nthe route table has\n%v", got, want)
	}
}

// Each error response names only codes the error table gives its status, and
// the envelope's codes are the error table's.
func TestErrorResponsesMatchTheErrorTable(t *testing.T) {
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for name, ref := range doc.Components.Responses {
		schema := ref.Value.Content.Get("application/json").Schema.Value
		for _, part := range schema.AllOf {
			props := part.Value.Properties
			if part.Ref != "" || props["status"] == nil {
				continue // the envelope itself
			}
			status := int(props["status"].Value.Const.(float64))
			for _, c := range props["error_code"].Value.Enum {
				if got := httpapi.Status(apierror.Code(c.(string))); got != status {
					t.Errorf("response %s (%d) names %s, whose status is %d", name, status, c, got)
				}
			}
		}
	}
	for _, c := range doc.Components.Schemas["Error"].Value.Properties["error_code"].Value.Enum {
		code := apierror.Code(c.(string))
		if env := httpapi.EnvelopeOf(apierror.New(code, "x")); env.ErrorCode != code {
			t.Errorf("Error names %s, which the error table does not know", code)
		}
	}
}

// The validator reports answers the document does not describe: an
// undocumented status, a body that does not match, an error that is not the
// envelope, a stream frame that is not a StreamFrame.
func TestValidatorReportsDrift(t *testing.T) {
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	answer := func(status int, ct, body string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", ct)
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		})
	}
	const id = "/api/remote_agents/0b8f1c5e-3c0e-4a55-9d1e-2a6a5f7f9b10"
	const sandbox = "/sandbox/0b8f1c5e-3c0e-4a55-9d1e-2a6a5f7f9b10"
	const types = "/api/v1/agent-types"
	const stored = `{"enabled":true,"repo_source":{"type":"none"},"tools":["read"],"resource_limits":{},"checkout_on_start":true,"base_image":null,"setup_commands":[],"setup_timeout_seconds":300,"warm_pool_size":0,"egress":{"mode":"allowlist","allow":[]}}`
	spec := func(tools string) string {
		return `{"session_id":"s","generation":1,"guardrails":{"content":"g","hash":"h"},"persona":{"slug":"p","display_name":"P","skill":"s","experience":"e","active":true},` +
			`"initial_prompt":"hi","feature_flags":{"file_upload":false,"context_usage":false,"voice_mic":false},"tmux_session_name":"m","session_type":"coding","prompt_mode":"p","system_prompt":"x","tools":` + tools + `}`
	}
	cases := []struct {
		name, method, path string
		h                  http.Handler
		bad                bool
	}{
		{"alive as documented", "GET", id + "/alive", answer(200, "application/json", `{"agent_id":"a","alive":true,"state":"idle","status":"active","guardrails_version":"h","guardrails_stale":false,"usage":{"input_tokens":1,"output_tokens":2,"cached_tokens":0,"calls":1}}`), false},
		{"alive without usage", "GET", id + "/alive", answer(200, "application/json", `{"agent_id":"a","alive":true,"state":"idle","status":"active","guardrails_version":"h","guardrails_stale":false}`), true},
		{"an undocumented status", "GET", id + "/alive", answer(418, "application/json", `{"status":418,"error_code":"server_error","message":"m","retryable":false}`), true},
		{"a code of another status", "GET", id + "/alive", answer(401, "application/json", `{"status":401,"error_code":"forbidden","message":"m","retryable":false}`), true},
		{"an envelope without retryable", "GET", id + "/alive", answer(401, "application/json", `{"status":401,"error_code":"invalid_token","message":"m"}`), true},
		{"an envelope for no route", "GET", "/nowhere", answer(404, "application/json", `{"status":404,"error_code":"not_found","message":"m","retryable":false}`), false},
		{"no envelope for no route", "GET", "/nowhere", answer(404, "text/plain", `404 page not found`), true},
		{"a stream as documented", "GET", id + "/events", answer(200, "text/event-stream", "retry: 1000\n\n: keep-alive\n\nid: 1\nevent: agent.message\ndata: {\"seq\":1,\"type\":\"agent.message\",\"at\":\"2026-01-01T00:00:00Z\",\"data\":{\"text\":\"hi\"}}\n\nevent: end\ndata: {}\n\n"), false},
		{"a stream event whose data is wrong", "GET", id + "/events", answer(200, "text/event-stream", "id: 1\nevent: agent.message\ndata: {\"seq\":1,\"type\":\"agent.message\",\"at\":\"2026-01-01T00:00:00Z\",\"data\":{\"text\":5}}\n\n"), true},
		{"an agent message with its html", "GET", id + "/events", answer(200, "text/event-stream", "id: 1\nevent: agent.message\ndata: {\"seq\":1,\"type\":\"agent.message\",\"at\":\"2026-01-01T00:00:00Z\",\"data\":{\"text\":\"**hi**\",\"html\":\"<p><strong>hi</strong></p>\"}}\n\n"), false},
		{"an agent message whose html is no string", "GET", id + "/events", answer(200, "text/event-stream", "id: 1\nevent: agent.message\ndata: {\"seq\":1,\"type\":\"agent.message\",\"at\":\"2026-01-01T00:00:00Z\",\"data\":{\"text\":\"hi\",\"html\":5}}\n\n"), true},
		{"a spec with every tool", "GET", sandbox + "/spec", answer(200, "application/json", spec(`null`)), false},
		{"a spec with its type's tools", "GET", sandbox + "/spec", answer(200, "application/json", spec(`["read","grep"]`)), false},
		{"a spec whose tools are no list", "GET", sandbox + "/spec", answer(200, "application/json", spec(`"read"`)), true},
		{"a spec without tools", "GET", sandbox + "/spec", answer(200, "application/json", strings.Replace(spec(`null`), `,"tools":null`, "", 1)), true},
		{"a workspace event as documented", "GET", id + "/events", answer(200, "text/event-stream", "id: 1\nevent: workspace.setup\ndata: {\"seq\":1,\"type\":\"workspace.setup\",\"at\":\"2026-01-01T00:00:00Z\",\"data\":{\"command\":\"make\",\"index\":1,\"total\":2}}\n\n"), false},
		{"a workspace event whose data is wrong", "GET", id + "/events", answer(200, "text/event-stream", "id: 1\nevent: workspace.ready\ndata: {\"seq\":1,\"type\":\"workspace.ready\",\"at\":\"2026-01-01T00:00:00Z\",\"data\":{\"status\":\"fine\",\"warnings\":[]}}\n\n"), true},
		{"alive with its workspace", "GET", id + "/alive", answer(200, "application/json", `{"agent_id":"a","alive":true,"state":"idle","status":"active","guardrails_version":"h","guardrails_stale":false,"usage":{"input_tokens":1,"output_tokens":2,"cached_tokens":0,"calls":1},"workspace":{"status":"degraded","warnings":["setup command 1 of 1 failed"]}}`), false},
		{"a creation timeout with its agent", "POST", "/api/remote_agents/create", answer(408, "application/json", `{"status":408,"error_code":"agent_creation_timeout","message":"m","retryable":true,"details":{"agent_id":"a","idempotency_key":"ra-k"}}`), false},
		{"a creation timeout without its resume handle", "POST", "/api/remote_agents/create", answer(408, "application/json", `{"status":408,"error_code":"agent_creation_timeout","message":"m","retryable":true,"details":{"agent_id":"a"}}`), true},
		{"an error with details", "PUT", types + "/coder/workspace-config", answer(400, "application/json", `{"status":400,"error_code":"invalid_request","message":"m","retryable":false,"details":{"invalid_tools":["ssh"],"valid_tools":["read"]}}`), false},
		{"an error whose details are no object", "PUT", types + "/coder/workspace-config", answer(400, "application/json", `{"status":400,"error_code":"invalid_request","message":"m","retryable":false,"details":"ssh"}`), true},
		{"an agent type as documented", "GET", types + "/coder", answer(200, "application/json", `{"id":"coder","name":"Coder","platform":false,"workspace_config":`+stored+`,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`), false},
		{"an agent type without its workspace", "GET", types + "/coder", answer(200, "application/json", `{"id":"coder","name":"Coder","platform":false}`), true},
		{"a workspace config with a field it has not", "GET", types + "/coder/workspace-config", answer(200, "application/json", strings.Replace(stored, "{", `{"privileged":true,`, 1)), true},
		{"the agent types", "GET", types, answer(200, "application/json", `{"agent_types":[{"id":"default","name":"Default","platform":true,"workspace_config":`+stored+`}]}`), false},
		{"an unknown agent type", "GET", types + "/nope", answer(404, "application/json", `{"status":404,"error_code":"agent_type_not_found","message":"m","retryable":false}`), false},
		{"an agent type that exists", "POST", types, answer(409, "application/json", `{"status":409,"error_code":"agent_type_exists","message":"m","retryable":false}`), false},
		{"an embed page", "GET", "/embed/x", answer(401, "text/html; charset=utf-8", "<p>no</p>"), false},
		{"an embed page as JSON", "GET", "/embed/x", answer(200, "application/json", "{}"), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(v.Problems())
			srv := httptest.NewServer(v.Middleware(c.h))
			defer srv.Close()
			req, err := http.NewRequestWithContext(t.Context(), c.method, srv.URL+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			srv.Close() // the handler has returned, the exchange is checked
			found := v.Problems()[before:]
			if c.bad != (len(found) > 0) {
				t.Errorf("bad=%v, problems: %v", c.bad, found)
			}
		})
	}
}

// A request the server accepted must be one the document allows.
func TestValidatorReportsAcceptedRequestsTheDocumentRejects(t *testing.T) {
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	created := `{"agent_id":"a","embed_url":"http://x/embed/a?token=t","session_token":"t","project_name":"p","persona_slug":"s","tmux_session_name":"m","status":"ready","guardrails_version":"h","feature_flags":{"file_upload":false,"context_usage":false,"voice_mic":false},"workspace":{"status":"none","warnings":[]}}`
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(created))
	})))
	for i, body := range []string{`{"project_name":"p","persona_slug":"s","initial_prompt":"hi"}`, `{"project_name":"p"}`} {
		req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/api/remote_agents/create", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer k"+strconv.Itoa(i))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
	}
	srv.Close()
	if got := v.Problems(); len(got) != 1 || !strings.Contains(got[0], "accepted a request the document rejects") {
		t.Errorf("problems: %v", got)
	}
}

// The frames of a stream, as the validator sees them.
func TestFrames(t *testing.T) {
	got, err := Frames([]byte("retry: 1000\n\n: c\n\nid: 2\nevent: x\ndata: {\"a\":\ndata: 1}\n\nid: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0]["retry"] != 1000 || got[1]["id"] != "2" || got[1]["event"] != "x" {
		t.Errorf("frames: %v", got)
	}
}
