// Package push holds a sandbox's push connection: the WebSocket over which
// the platform pushes to the sandbox (inbox writes to a session's sandbox,
// assignments to a pool sandbox), reconnected with backoff and renewed before
// API Gateway cuts it.
package push

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/coder/websocket"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Pacing of a push connection.
const (
	// pingEvery keeps the connection from API Gateway's 10-minute idle cut.
	pingEvery = 5 * time.Minute
	// lifetime renews the connection before API Gateway's two-hour cut.
	lifetime = 110 * time.Minute
	// retryMin and retryMax bound the backoff between connects.
	retryMin = 100 * time.Millisecond
	retryMax = 30 * time.Second
)

// Peer is whom a push connection is for and what is done with what comes
// over it: the query parameter naming the sandbox (PushSessionParam with its
// session, PushPoolParam with its pool sandbox id), the bearer of the upgrade
// request, and the callbacks, all called from the listener's goroutine.
type Peer struct {
	Param, ID, Bearer string
	// Connected is called on each connect.
	Connected func()
	// Frame is called with each frame read that parses.
	Frame func(sandboxwire.Push)
	// Down is called when a connect failed or a connection ended (err),
	// before the listener waits retryIn to connect again.
	Down func(err error, retryIn time.Duration)
}

// Hold holds a push connection to pushURL for peer until ctx ends,
// reconnecting with backoff (reset by every connect that succeeded).
func Hold(ctx context.Context, pushURL string, peer Peer, log *slog.Logger) {
	delay := retryMin
	for ctx.Err() == nil {
		connected, err := once(ctx, pushURL, peer, log)
		if ctx.Err() != nil {
			return
		}
		if connected {
			delay = retryMin
		}
		peer.Down(err, delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, retryMax)
	}
}

// once connects once and reads frames until the connection ends; it reports
// whether it connected.
func once(ctx context.Context, pushURL string, peer Peer, log *slog.Logger) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, lifetime)
	defer cancel()
	u, err := url.Parse(pushURL)
	if err != nil {
		return false, fmt.Errorf("push URL: %w", err)
	}
	q := u.Query()
	q.Set(peer.Param, peer.ID)
	u.RawQuery = q.Encode()
	dialCtx, cancelDial := context.WithTimeout(ctx, 30*time.Second)
	defer cancelDial()
	c, res, err := websocket.Dial(dialCtx, u.String(), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + peer.Bearer}},
	})
	if res != nil && res.Body != nil {
		_ = res.Body.Close()
	}
	if err != nil {
		return false, fmt.Errorf("push connect: %w", err)
	}
	defer func() { _ = c.CloseNow() }()
	c.SetReadLimit(sandboxwire.MaxPushFrameBytes)
	log.Info("push channel connected", slog.String(peer.Param, peer.ID))
	peer.Connected()
	go ping(ctx, c)
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return true, fmt.Errorf("push read: %w", err)
		}
		var f sandboxwire.Push
		if json.Unmarshal(data, &f) == nil {
			peer.Frame(f)
		}
	}
}

// ping pings c every pingEvery until ctx ends.
func ping(ctx context.Context, c *websocket.Conn) {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_ = c.Ping(pctx)
			cancel()
		}
	}
}
