package devserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/httpapi"
)

// The gateway turns a request into the event API Gateway would send the
// route's function (route key, path parameters, lower-case headers, query,
// a binary body base64-encoded) and its answer back into HTTP; a path of no
// route is 404, a method of none 405, a body declared over 10 MB 413, all in
// the error envelope.
func TestGatewayTurnsRequestsIntoEvents(t *testing.T) {
	t.Parallel()
	var got httpapi.Request
	echo := func(_ context.Context, ev httpapi.Request) (httpapi.Response, error) {
		got = ev
		return httpapi.Response{StatusCode: http.StatusCreated, Headers: map[string]string{"X-Seen": ev.PathParameters["id"]},
			Body: base64.StdEncoding.EncodeToString([]byte{0xff, 0x00}), IsBase64Encoded: true}, nil
	}
	g := &gateway{routes: []httpapi.Route{{Method: http.MethodPost, Pattern: "/things/{id}/parts", Handler: echo}},
		functions: map[string]string{"POST /things/{id}/parts": "things"}, closing: t.Context()}

	req := httptest.NewRequest(http.MethodPost, "/things/abc/parts?x=1&x=2&y=3", strings.NewReader("\xff\xfe binary"))
	req.Header.Set("X-Custom", "v")
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated || rec.Header().Get("X-Seen") != "abc" || rec.Body.String() != "\xff\x00" {
		t.Errorf("answer %d %v %q", rec.Code, rec.Header(), rec.Body.String())
	}
	if got.RouteKey != "POST /things/{id}/parts" || got.RequestContext.RouteKey != got.RouteKey || got.RawPath != "/things/abc/parts" ||
		got.PathParameters["id"] != "abc" || got.Headers["x-custom"] != "v" || got.QueryStringParameters["x"] != "1,2" ||
		got.QueryStringParameters["y"] != "3" || got.RequestContext.HTTP.Method != http.MethodPost || got.RequestContext.RequestID == "" {
		t.Errorf("event %+v", got)
	}
	if body, err := base64.StdEncoding.DecodeString(got.Body); !got.IsBase64Encoded || err != nil || string(body) != "\xff\xfe binary" {
		t.Errorf("binary body %q (base64 %v)", got.Body, got.IsBase64Encoded)
	}

	for _, tt := range []struct {
		name, method, path string
		length             int64
		status             int
		code               string
	}{
		{"no route", http.MethodGet, "/nothing", 0, http.StatusNotFound, "not_found"},
		{"another method", http.MethodGet, "/things/abc/parts", 0, http.StatusMethodNotAllowed, "method_not_allowed"},
		{"too large", http.MethodPost, "/things/abc/parts", maxRequestBytes + 1, http.StatusRequestEntityTooLarge, "payload_too_large"},
	} {
		req := httptest.NewRequest(tt.method, tt.path, strings.NewReader("{}"))
		req.ContentLength = tt.length
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		var env httpapi.Envelope
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || rec.Code != tt.status || env.Status != tt.status || string(env.ErrorCode) != tt.code {
			t.Errorf("%s: %d %s", tt.name, rec.Code, rec.Body.String())
		}
		if allow := rec.Header().Get("Allow"); tt.status == http.StatusMethodNotAllowed && allow != http.MethodPost {
			t.Errorf("%s: Allow %q, want POST", tt.name, allow)
		}
	}
}

// A path that is not clean is not_found in the envelope, as API Gateway
// matches paths as sent: no redirect to the clean path (which a client
// would follow with its POST again).
func TestUncleanPathsAreNotFound(t *testing.T) {
	t.Parallel()
	reached := false
	h := canonicalPaths(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached = true }))
	for _, p := range []string{"/api//remote_agents", "/api/remote_agents/x/./alive", "/api/remote_agents/x/../create", "/api/remote_agents/x/%2e%2e/create", "//internal/agents", "/api/%2E/create"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, p, nil))
		var env httpapi.Envelope
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || rec.Code != http.StatusNotFound || env.ErrorCode != "not_found" || reached {
			t.Errorf("%s: %d %s (reached %v)", p, rec.Code, rec.Body.String(), reached)
		}
	}
	// An escaped slash is part of its segment: a push connection's id may
	// hold one (the SDK escapes it).
	for _, p := range []string{"/api/remote_agents/create", "/api/remote_agents/", "/", "/@connections/%2Fw5h2HABZ%2Fq%3D", "/@connections/ab%2F%2Fcd"} {
		reached = false
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, p, nil))
		if !reached {
			t.Errorf("%s did not reach the routes", p)
		}
	}
}
