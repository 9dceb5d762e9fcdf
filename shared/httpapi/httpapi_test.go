package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
)

type createBody struct {
	Name  string     `json:"name"`
	Count int        `json:"count"`
	Since *time.Time `json:"since,omitempty"`
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		body     string
		base64   bool
		wantCode apierror.Code
		wantMsg  string
	}{
		{"ok", `{"name":"a","count":2}`, false, "", ""},
		{"ok base64", base64.StdEncoding.EncodeToString([]byte(`{"name":"a"}`)), true, "", ""},
		{"empty", ``, false, apierror.InvalidRequest, "must be a JSON object"},
		{"malformed", `{"name":`, false, apierror.InvalidRequest, "truncated"},
		{"syntax", `{"name" "a"}`, false, apierror.InvalidRequest, "not valid JSON"},
		{"unknown field", `{"name":"a","admin":true}`, false, apierror.InvalidRequest, "a field this route does not take"},
		{"wrong type", `{"count":"two"}`, false, apierror.InvalidRequest, `Field "count" must be of type number`},
		{"fraction", `{"count":1.5}`, false, apierror.InvalidRequest, `Field "count" must be a whole number in range`},
		{"out of range", `{"count":1e30}`, false, apierror.InvalidRequest, `Field "count" must be a whole number in range`},
		{"not a time", `{"since":"yesterday"}`, false, apierror.InvalidRequest, "not RFC 3339"},
		{"array", `[1]`, false, apierror.InvalidRequest, "must be a JSON object"},
		{"two objects", `{"name":"a"}{"name":"b"}`, false, apierror.InvalidRequest, "single JSON object"},
		{"too large", `{"name":"` + strings.Repeat("x", 200) + `"}`, false, apierror.PayloadTooLarge, "larger than 128"},
		{"bad base64", `%%%`, true, apierror.InvalidRequest, "base64"},
	}
	for _, tt := range tests {
		var v createBody
		err := httpapi.DecodeJSON(httpapi.Request{Body: tt.body, IsBase64Encoded: tt.base64}, 128, &v)
		if tt.wantCode == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		var e *apierror.Error
		if !errors.As(err, &e) || e.Code != tt.wantCode || !strings.Contains(e.Message, tt.wantMsg) {
			t.Errorf("%s: got %v, want %s containing %q", tt.name, err, tt.wantCode, tt.wantMsg)
		}
	}
}

// A body declared of another type than JSON is 415 unsupported_media_type,
// before its size or its JSON are looked at; JSON's types, with parameters
// or the +json suffix, and no type at all are read as JSON.
func TestDecodeJSONContentType(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		contentType, body string
		want              apierror.Code
	}{
		{"application/json", `{"name":"a"}`, ""},
		{"Application/JSON; charset=utf-8", `{"name":"a"}`, ""},
		{"application/merge-patch+json", `{"name":"a"}`, ""},
		{"", `{"name":"a"}`, ""},
		{"application/x-www-form-urlencoded", `{"name":"a"}`, apierror.UnsupportedMediaType},
		{"text/plain", `{"name":"a"}`, apierror.UnsupportedMediaType},
		{"multipart/form-data; boundary=x", `{"name":"a"}`, apierror.UnsupportedMediaType},
		{"json", `{"name":"a"}`, apierror.UnsupportedMediaType},
		{"text/plain", strings.Repeat("x", 200), apierror.UnsupportedMediaType},
	} {
		var v createBody
		req := httpapi.Request{Body: tt.body, Headers: map[string]string{"Content-Type": tt.contentType}}
		err := httpapi.DecodeJSON(req, 128, &v)
		if got := apierror.CodeOf(err); got != tt.want {
			t.Errorf("Content-Type %q: %v, want %q", tt.contentType, err, tt.want)
		}
	}
}

// A field name the route does not know is the client's text: the message
// says what is wrong without repeating it.
func TestDecodeJSONDoesNotEchoUnknownFields(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"name":"a","<script>alert(1)</script>":true}`,
		`{"name":"a","sk_live_secret_pasted_as_a_key":1}`,
	} {
		var v createBody
		err := httpapi.DecodeJSON(httpapi.Request{Body: body}, 1024, &v)
		var e *apierror.Error
		if !errors.As(err, &e) || e.Code != apierror.InvalidRequest {
			t.Fatalf("%s: got %v, want invalid_request", body, err)
		}
		if strings.Contains(e.Message, "script") || strings.Contains(e.Message, "secret") || !strings.Contains(e.Message, "field") {
			t.Errorf("%s: message %q echoes the field name, or does not say what is wrong", body, e.Message)
		}
	}
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]string{
		"Bearer abc":   "abc",
		"bearer  abc ": "abc",
		"Basic abc":    "",
		"abc":          "",
		"":             "",
	} {
		req := httpapi.Request{Headers: map[string]string{"authorization": header}}
		if got := httpapi.BearerToken(req); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", header, got, want)
		}
	}
}

func TestErrorHidesInternalDetail(t *testing.T) {
	t.Parallel()
	res := httpapi.Error(context.Background(), nil, errors.New("dial tcp 10.0.0.7:443: refused"))
	var env httpapi.Envelope
	if err := json.Unmarshal([]byte(res.Body), &env); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 500 || env.ErrorCode != apierror.ServerError || strings.Contains(res.Body, "10.0.0.7") {
		t.Errorf("response %d %s", res.StatusCode, res.Body)
	}
}

func TestCORS(t *testing.T) {
	t.Parallel()
	inner := func(context.Context, httpapi.Request) (httpapi.Response, error) {
		return httpapi.JSON(200, map[string]bool{"ok": true}), nil
	}
	h := httpapi.CORS([]string{"https://app.example.com"}, "GET, POST", inner)
	call := func(method, origin string) httpapi.Response {
		req := httpapi.Request{Headers: map[string]string{"origin": origin}}
		req.RequestContext.HTTP.Method = method
		res, err := h(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := call("GET", "https://app.example.com"); res.Headers["Access-Control-Allow-Origin"] != "https://app.example.com" {
		t.Errorf("allowed origin: headers %v", res.Headers)
	}
	if res := call("OPTIONS", "https://app.example.com"); res.StatusCode != 204 || !strings.Contains(res.Headers["Access-Control-Allow-Methods"], "POST") ||
		!strings.Contains(res.Headers["Access-Control-Allow-Headers"], "Authorization") {
		t.Errorf("allowed preflight: %d %v", res.StatusCode, res.Headers)
	}
	for _, method := range []string{"GET", "OPTIONS"} {
		res := call(method, "https://evil.example.com")
		for k := range res.Headers {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s from refused origin got %s", method, k)
			}
		}
	}
}

// Through a function URL (route key $default) the router finds the route by
// method and path, as API Gateway would, with its path parameters; a known
// path with another method is method_not_allowed, an unknown path not_found.
func TestRouterServesFunctionURLRequestsByPath(t *testing.T) {
	t.Parallel()
	answer := func(name string) httpapi.Handler {
		return func(_ context.Context, req httpapi.Request) (httpapi.Response, error) {
			return httpapi.JSON(200, map[string]any{"route": name, "key": req.RouteKey, "params": req.PathParameters}), nil
		}
	}
	h := httpapi.Router([]httpapi.Route{
		{Method: "POST", Pattern: "/api/remote_agents/{id}/messages", Handler: answer("messages"), CORS: true},
		{Method: "POST", Pattern: "/api/remote_agents/{id}/env", Handler: answer("env"), CORS: true},
		{Method: "GET", Pattern: "/sandbox/{sessionId}/spec", Handler: answer("spec")},
	})
	tests := []struct {
		name, method, path string
		status             int
		want               string
	}{
		{"route", "POST", "/api/remote_agents/ra_1/env", 200, `{"key":"POST /api/remote_agents/{id}/env","params":{"id":"ra_1"},"route":"env"}`},
		{"other route", "GET", "/sandbox/s_2/spec", 200, `{"key":"GET /sandbox/{sessionId}/spec","params":{"sessionId":"s_2"},"route":"spec"}`},
		{"preflight of a CORS route", "OPTIONS", "/api/remote_agents/ra_1/messages", 200, `"route":"messages"`},
		{"no preflight elsewhere", "OPTIONS", "/sandbox/s_2/spec", 405, `"method_not_allowed"`},
		{"wrong method", "GET", "/api/remote_agents/ra_1/env", 405, `"method_not_allowed"`},
		{"unknown path", "POST", "/api/remote_agents/ra_1/other", 404, `"not_found"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var req httpapi.Request
			req.RouteKey = httpapi.DefaultRouteKey
			req.RawPath = tt.path
			req.RequestContext.HTTP.Method = tt.method
			res, err := h(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tt.status || !strings.Contains(res.Body, tt.want) {
				t.Errorf("%s %s: %d %s, want %d with %s", tt.method, tt.path, res.StatusCode, res.Body, tt.status, tt.want)
			}
			// A 405 says what the path takes (RFC 9110).
			if allow := res.Headers["Allow"]; tt.status == 405 && allow != map[string]string{"/api/remote_agents/ra_1/env": "OPTIONS, POST", "/sandbox/s_2/spec": "GET"}[tt.path] {
				t.Errorf("%s %s: Allow %q", tt.method, tt.path, allow)
			}
		})
	}
}
