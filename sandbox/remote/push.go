package remote

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/push"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// defaultPushedPoll is Config.PushedPoll's default.
const defaultPushedPoll = 10 * time.Second

// listen holds the sandbox's push connection until ctx ends, reconnecting with
// backoff, and signals wake for every inbox frame, and once on each connect
// (for whatever came while it was down). A full wake is enough: one inbox read
// takes all that waits. up says whether the connection is up.
func (r *run) listen(ctx context.Context, pushURL string, wake chan<- struct{}, up *atomic.Bool, log *slog.Logger) {
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	push.Hold(ctx, pushURL, push.Peer{
		Param: sandboxwire.PushSessionParam, ID: r.c.SessionID, Bearer: r.c.Token,
		Connected: func() {
			up.Store(true)
			signal() // whatever came while the connection was down
		},
		Frame: func(f sandboxwire.Push) {
			switch {
			case strings.EqualFold(f.Type, sandboxwire.PushInbox):
				signal()
			case strings.EqualFold(f.Type, sandboxwire.PushWatch):
				r.watched.set(f.Viewers, f.ViewerEpoch)
			}
		},
		Down: func(err error, retryIn time.Duration) {
			up.Store(false)
			log.Info("push channel down; polling the inbox until it is back", slog.String("error", err.Error()), slog.Duration("retry_in", retryIn))
		},
	}, log)
}
