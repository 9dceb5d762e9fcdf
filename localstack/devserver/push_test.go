package devserver

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/remote-agents/remote-agents/shared/httpapi"
)

// The push hub as API Gateway's WebSocket API: an upgrade is the $connect
// event (its headers and query with it), refused unless the handler answers
// 200; an @connections post is one text frame on the connection, a delete
// closes it (then $disconnect, and 410 GoneException for it); while refusing,
// an upgrade is 503.
func TestPushHubIsTheWebSocketAPI(t *testing.T) {
	t.Parallel()
	events := make(chan httpapi.SocketRequest, 4)
	socket := func(_ context.Context, ev httpapi.SocketRequest) (httpapi.SocketResponse, error) {
		events <- ev
		if ev.RequestContext.RouteKey == "$connect" && ev.QueryStringParameters["token"] != "good" {
			return httpapi.SocketResponse{StatusCode: http.StatusUnauthorized, Body: "no"}, nil
		}
		return httpapi.SocketResponse{StatusCode: http.StatusOK}, nil
	}
	h := newPushHub(socket, t.Context(), slog.New(slog.DiscardHandler))
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PushPath, h.serveSocket)
	mux.HandleFunc("POST /@connections/{connectionId}", h.post)
	mux.HandleFunc("DELETE /@connections/{connectionId}", h.remove)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ws := "ws" + strings.TrimPrefix(srv.URL, "http") + PushPath

	if c, res, err := websocket.Dial(t.Context(), ws+"?token=bad", nil); err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a refused $connect: %v %v", res, err)
	} else if c != nil {
		_ = c.CloseNow()
	}
	<-events

	c, _, err := websocket.Dial(t.Context(), ws+"?token=good", &websocket.DialOptions{HTTPHeader: http.Header{"X-Session": {"s1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.CloseNow() }()
	connect := <-events
	id := connect.RequestContext.ConnectionID
	if connect.RequestContext.RouteKey != "$connect" || connect.Headers["X-Session"] != "s1" || id == "" {
		t.Fatalf("$connect event %+v", connect)
	}
	// The Management API's client escapes the id (base64: '/' and '+').
	manage := func(method string, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+"/@connections/"+url.PathEscape(id), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res
	}
	if res := manage(http.MethodPost, `{"wake":true}`); res.StatusCode != http.StatusOK {
		t.Fatalf("post: %d", res.StatusCode)
	}
	if typ, frame, err := c.Read(t.Context()); err != nil || typ != websocket.MessageText || string(frame) != `{"wake":true}` {
		t.Fatalf("frame %v %q %v", typ, frame, err)
	}
	if res := manage(http.MethodPost, strings.Repeat("x", maxPushFrame+1)); res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized post: %d", res.StatusCode)
	}
	// The sandbox reads on, as it does, to see the close (and answer it).
	closed := make(chan error, 1)
	go func() {
		_, _, err := c.Read(context.Background())
		closed <- err
	}()
	if res := manage(http.MethodDelete, ""); res.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", res.StatusCode)
	}
	if err := <-closed; websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("after a delete the connection reads %v", err)
	}
	if ev := <-events; ev.RequestContext.RouteKey != "$disconnect" || ev.RequestContext.ConnectionID != id {
		t.Errorf("after a delete: %+v", ev)
	}
	if res := manage(http.MethodPost, "{}"); res.StatusCode != http.StatusGone || res.Header.Get("x-amzn-ErrorType") != "GoneException" {
		t.Errorf("a post to a closed connection: %d %v", res.StatusCode, res.Header)
	}

	h.refuse(true)
	if _, res, err := websocket.Dial(t.Context(), ws+"?token=good", nil); err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("while refusing: %v %v", res, err)
	}
}
