package remote

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
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
)

// listen holds the sandbox's push connection until ctx ends, reconnecting with
// backoff, and signals wake for every inbox frame, and once on each connect
// (for whatever came while it was down). A full wake is enough: one inbox read
// takes all that waits.
func (cl *client) listen(ctx context.Context, pushURL string, wake chan<- struct{}, log *slog.Logger) {
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	delay := pushRetryMin
	for ctx.Err() == nil {
		connected, err := cl.pushOnce(ctx, pushURL, signal, log)
		if ctx.Err() != nil {
			return
		}
		if connected {
			delay = pushRetryMin
		}
		log.Info("push channel down; polling the inbox until it is back", slog.String("error", err.Error()), slog.Duration("retry_in", delay))
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
func (cl *client) pushOnce(ctx context.Context, pushURL string, signal func(), log *slog.Logger) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, pushLifetime)
	defer cancel()
	u, err := url.Parse(pushURL)
	if err != nil {
		return false, err
	}
	q := u.Query()
	q.Set(sandboxwire.PushSessionParam, cl.c.SessionID)
	u.RawQuery = q.Encode()
	dialCtx, cancelDial := context.WithTimeout(ctx, 30*time.Second)
	defer cancelDial()
	c, res, err := websocket.Dial(dialCtx, u.String(), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + cl.c.Token}},
	})
	if res != nil && res.Body != nil {
		_ = res.Body.Close()
	}
	if err != nil {
		return false, err
	}
	defer func() { _ = c.CloseNow() }()
	c.SetReadLimit(sandboxwire.MaxPushFrameBytes)
	log.Info("push channel connected")
	signal() // whatever came while the connection was down
	go func() {
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
	}()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return true, err
		}
		var f sandboxwire.Push
		if json.Unmarshal(data, &f) == nil && strings.EqualFold(f.Type, sandboxwire.PushInbox) {
			signal()
		}
	}
}
