package httpapi_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/remote-agents/remote-agents/shared/httpapi"
)

// WithSocket sends WebSocket API events (they name their connection) to the
// socket handler and HTTP API events to the router.
func TestWithSocketDispatches(t *testing.T) {
	h := httpapi.WithSocket(
		func(_ context.Context, req httpapi.Request) (httpapi.Response, error) {
			return httpapi.JSON(200, map[string]string{"http": req.RouteKey}), nil
		},
		func(_ context.Context, req httpapi.SocketRequest) (httpapi.SocketResponse, error) {
			return httpapi.SocketJSON(200, map[string]string{"socket": req.RequestContext.RouteKey + " " + req.RequestContext.ConnectionID + " " + req.QueryStringParameters["session_id"]}), nil
		})
	for _, c := range []struct{ name, event, want string }{
		{"connect", `{"headers":{"Authorization":"Bearer x"},"queryStringParameters":{"session_id":"s1"},"requestContext":{"routeKey":"$connect","eventType":"CONNECT","connectionId":"L0SM9cOFvHcCIhw=","stage":"push","apiId":"abc"},"isBase64Encoded":false}`, `{"socket":"$connect L0SM9cOFvHcCIhw= s1"}`},
		{"disconnect", `{"requestContext":{"routeKey":"$disconnect","eventType":"DISCONNECT","connectionId":"L0SM9cOFvHcCIhw="}}`, `{"socket":"$disconnect L0SM9cOFvHcCIhw= "}`},
		{"http", `{"version":"2.0","routeKey":"GET /sandbox/{sessionId}/inbox","rawPath":"/sandbox/s1/inbox","requestContext":{"http":{"method":"GET"},"routeKey":"GET /sandbox/{sessionId}/inbox"}}`, `{"http":"GET /sandbox/{sessionId}/inbox"}`},
	} {
		out, err := h(t.Context(), json.RawMessage(c.event))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		raw, _ := json.Marshal(out)
		var res struct {
			Body string `json:"body"`
		}
		if err := json.Unmarshal(raw, &res); err != nil || res.Body != c.want {
			t.Errorf("%s: %s, want body %s", c.name, raw, c.want)
		}
	}
	if _, err := h(t.Context(), json.RawMessage(`[`)); err == nil {
		t.Error("a malformed event was served")
	}
}
