package devserver

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/coder/websocket"

	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/viewerpush"
)

// PushPath is where the dev server serves the push channel's WebSocket: what
// an API Gateway WebSocket API's stage URL is on AWS.
const PushPath = "/@push"

// maxPushFrame is API Gateway's frame limit for @connections posts (128 KB).
const maxPushFrame = 128 << 10

// pushHub is the push channel as API Gateway's WebSocket API serves it: it
// turns a WebSocket upgrade into the $connect event and a close into
// $disconnect, calls the sandbox function's handler in-process for them, and
// serves the Management API's @connections routes (the same SDK client the
// platform uses on AWS, pointed at the dev server, posts to them).
type pushHub struct {
	socket   httpapi.SocketHandler
	function string
	closing  context.Context
	log      *slog.Logger

	refused atomic.Bool
	mu      sync.Mutex
	conns   map[string]*pushConn
}

// pushConn is one connection: ready closes once $connect has answered, and c
// is then the accepted socket (nil if $connect refused it).
type pushConn struct {
	ready chan struct{}
	c     *websocket.Conn
}

func newPushHub(socket httpapi.SocketHandler, closing context.Context, log *slog.Logger) *pushHub {
	fn := ""
	if all := routes.Sockets(); len(all) > 0 {
		fn = all[0].Function
	}
	return &pushHub{socket: socket, function: fn, closing: closing, log: log, conns: map[string]*pushConn{}}
}

// serveSocket upgrades a sandbox's request, if $connect accepts it, and holds
// the connection until either side closes it.
func (h *pushHub) serveSocket(w http.ResponseWriter, r *http.Request) {
	if h.refused.Load() {
		http.Error(w, `{"message":"Service Unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	id := newConnectionID()
	pc := &pushConn{ready: make(chan struct{})}
	h.mu.Lock()
	h.conns[id] = pc
	h.mu.Unlock()
	forget := func() {
		h.mu.Lock()
		delete(h.conns, id)
		h.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(withFunction(r.Context(), h.function), handlerTimeout)
	res, err := h.socket(ctx, h.event(r, id, "$connect", "CONNECT"))
	cancel()
	if err != nil || res.StatusCode != http.StatusOK {
		close(pc.ready)
		forget()
		if err != nil {
			res = httpapi.SocketError(r.Context(), err)
		}
		for k, v := range res.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(res.StatusCode)
		_, _ = io.WriteString(w, res.Body)
		return
	}
	// API Gateway takes a connection from any origin; a viewer proves
	// itself by the token of its sync, never by a cookie, so the dev
	// server takes a viewer's from any origin too.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: viewerpush.IsViewer(h.event(r, id, "$connect", "CONNECT"))})
	pc.c = c
	close(pc.ready)
	if err == nil {
		stop := context.AfterFunc(h.closing, func() { _ = c.Close(websocket.StatusGoingAway, "server closing") })
		for {
			// Sandboxes send nothing; viewers send their syncs, which go to
			// the $default route in order, as API Gateway's do. Reading
			// also answers pings and sees the close.
			typ, body, err := c.Read(context.Background())
			if err != nil {
				break
			}
			if typ != websocket.MessageText {
				continue
			}
			ev := h.event(r, id, "$default", "MESSAGE")
			ev.Body = string(body)
			mctx, cancel := context.WithTimeout(withFunction(context.WithoutCancel(r.Context()), h.function), handlerTimeout)
			if _, err := h.socket(mctx, ev); err != nil {
				h.log.Warn("devserver: $default", slog.String("error", err.Error()))
			}
			cancel()
		}
		stop()
		_ = c.CloseNow()
	}
	forget()
	dctx, cancel := context.WithTimeout(withFunction(context.WithoutCancel(r.Context()), h.function), handlerTimeout)
	defer cancel()
	if _, err := h.socket(dctx, h.event(r, id, "$disconnect", "DISCONNECT")); err != nil {
		h.log.Warn("devserver: $disconnect", slog.String("error", err.Error()))
	}
}

// event is the WebSocket API's event for route key of connection id.
func (h *pushHub) event(r *http.Request, id, routeKey, eventType string) httpapi.SocketRequest {
	ev := httpapi.SocketRequest{
		RequestContext: events.APIGatewayWebsocketProxyRequestContext{
			RouteKey:         routeKey,
			EventType:        eventType,
			ConnectionID:     id,
			Stage:            "local",
			DomainName:       r.Host,
			APIID:            "local",
			RequestID:        newRequestID(),
			RequestTimeEpoch: time.Now().UnixMilli(),
		},
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	ev.RequestContext.Identity.SourceIP = host
	if routeKey != "$connect" {
		return ev // API Gateway gives $disconnect none of the upgrade's headers
	}
	ev.Headers = map[string]string{}
	for k, v := range r.Header {
		ev.Headers[k] = strings.Join(v, ",")
	}
	ev.QueryStringParameters = map[string]string{}
	for k, v := range r.URL.Query() {
		ev.QueryStringParameters[k] = strings.Join(v, ",")
	}
	return ev
}

// conn returns the open connection id, once $connect has answered; nil if it
// is gone or was refused.
func (h *pushHub) conn(ctx context.Context, id string) *websocket.Conn {
	h.mu.Lock()
	pc := h.conns[id]
	h.mu.Unlock()
	if pc == nil {
		return nil
	}
	select {
	case <-pc.ready:
		return pc.c
	case <-ctx.Done():
		return nil
	}
}

// post serves POST /@connections/{connectionId} (PostToConnection): the body
// as one text frame; 410 GoneException for a connection that is not open.
func (h *pushHub) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPushFrame+1))
	if err != nil || len(body) > maxPushFrame {
		managementError(w, http.StatusRequestEntityTooLarge, "PayloadTooLargeException", "The data is larger than 128 KB.")
		return
	}
	c := h.conn(r.Context(), r.PathValue("connectionId"))
	if c == nil {
		managementError(w, http.StatusGone, "GoneException", "The connection is gone.")
		return
	}
	if err := c.Write(r.Context(), websocket.MessageText, body); err != nil {
		managementError(w, http.StatusGone, "GoneException", "The connection is gone.")
		return
	}
	w.WriteHeader(http.StatusOK)
}

// remove serves DELETE /@connections/{connectionId} (DeleteConnection):
// the platform closes the connection.
func (h *pushHub) remove(w http.ResponseWriter, r *http.Request) {
	c := h.conn(r.Context(), r.PathValue("connectionId"))
	if c == nil {
		managementError(w, http.StatusGone, "GoneException", "The connection is gone.")
		return
	}
	_ = c.Close(websocket.StatusNormalClosure, "deleted")
	w.WriteHeader(http.StatusNoContent)
}

// refuse makes the push channel refuse new connections, and closes the open
// ones, while on: an outage of the WebSocket API.
func (h *pushHub) refuse(on bool) {
	h.refused.Store(on)
	if !on {
		return
	}
	h.mu.Lock()
	var open []*websocket.Conn
	for _, pc := range h.conns {
		select {
		case <-pc.ready:
			if pc.c != nil {
				open = append(open, pc.c)
			}
		default:
		}
	}
	h.mu.Unlock()
	for _, c := range open {
		_ = c.Close(websocket.StatusGoingAway, "push channel down")
	}
}

// managementError answers as the Management API does: the error's type in
// x-amzn-ErrorType, and a JSON message.
func managementError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-ErrorType", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

// newConnectionID is a connection id as API Gateway makes them: 16
// characters of base64.
func newConnectionID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)[:15] + "="
}
