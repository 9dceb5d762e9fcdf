package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Push channel pacing.
const (
	// pushPing keeps the connection from API Gateway's 10-minute idle cut.
	pushPing = 5 * time.Minute
	// pushLifetime renews the connection before API Gateway's two-hour cut.
	pushLifetime = 110 * time.Minute
	// pushRetryMin and pushRetryMax bound the backoff between connects.
	pushRetryMin = 100 * time.Millisecond
	pushRetryMax = 30 * time.Second
	// defaultPushedPoll is Config.PushedPoll's default.
	defaultPushedPoll = 10 * time.Second
)

// pushPeer is whom a push connection is for and what is done with what comes
// over it: the query parameter naming the sandbox (PushSessionParam with its
// session, PushPoolParam with its pool sandbox id), the bearer of the upgrade
// request, and the callbacks, all called from the listener's goroutine.
type pushPeer struct {
	param, id, bearer string
	// connected is called on each connect.
	connected func()
	// frame is called with each frame read that parses.
	frame func(sandboxwire.Push)
	// down is called when a connect failed or a connection ended (err),
	// before the listener waits retryIn to connect again.
	down func(err error, retryIn time.Duration)
}

// listen holds the sandbox's push connection until ctx ends, reconnecting with
// backoff, and signals wake for every inbox frame, and once on each connect
// (for whatever came while it was down). A full wake is enough: one inbox read
// takes all that waits. up says whether the connection is up.
func (cl *client) listen(ctx context.Context, pushURL string, wake chan<- struct{}, up *atomic.Bool, log *slog.Logger) {
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	hold(ctx, pushURL, pushPeer{
		param: sandboxwire.PushSessionParam, id: cl.c.SessionID, bearer: cl.c.Token,
		connected: func() {
			up.Store(true)
			signal() // whatever came while the connection was down
		},
		frame: func(f sandboxwire.Push) {
			if strings.EqualFold(f.Type, sandboxwire.PushInbox) {
				signal()
			}
		},
		down: func(err error, retryIn time.Duration) {
			up.Store(false)
			log.Info("push channel down; polling the inbox until it is back", slog.String("error", err.Error()), slog.Duration("retry_in", retryIn))
		},
	}, log)
}

// hold holds a push connection for peer until ctx ends, reconnecting with
// backoff (reset by every connect that succeeded).
func hold(ctx context.Context, pushURL string, peer pushPeer, log *slog.Logger) {
	delay := pushRetryMin
	for ctx.Err() == nil {
		connected, err := pushOnce(ctx, pushURL, peer, log)
		if ctx.Err() != nil {
			return
		}
		if connected {
			delay = pushRetryMin
		}
		peer.down(err, delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, pushRetryMax)
	}
}

// pushOnce connects once and reads frames until the connection ends; it
// reports whether it connected.
func pushOnce(ctx context.Context, pushURL string, peer pushPeer, log *slog.Logger) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, pushLifetime)
	defer cancel()
	u, err := url.Parse(pushURL)
	if err != nil {
		return false, fmt.Errorf("push URL: %w", err)
	}
	q := u.Query()
	q.Set(peer.param, peer.id)
	u.RawQuery = q.Encode()
	dialCtx, cancelDial := context.WithTimeout(ctx, 30*time.Second)
	defer cancelDial()
	c, res, err := websocket.Dial(dialCtx, u.String(), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + peer.bearer}},
	})
	if res != nil && res.Body != nil {
		_ = res.Body.Close()
	}
	if err != nil {
		return false, fmt.Errorf("push connect: %w", err)
	}
	defer func() { _ = c.CloseNow() }()
	c.SetReadLimit(sandboxwire.MaxPushFrameBytes)
	log.Info("push channel connected", slog.String(peer.param, peer.id))
	peer.connected()
	go ping(ctx, c)
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return true, fmt.Errorf("push read: %w", err)
		}
		var f sandboxwire.Push
		if json.Unmarshal(data, &f) == nil {
			peer.frame(f)
		}
	}
}

// ping pings c every pushPing until ctx ends.
func ping(ctx context.Context, c *websocket.Conn) {
	t := time.NewTicker(pushPing)
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
