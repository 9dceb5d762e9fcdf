package sandboxchannel

import (
	"context"
	"errors"
	"regexp"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// connectionID is what a push connection id may look like (API Gateway's are
// base64, e.g. "L0SM9cOFvHcCIhw=").
var connectionID = regexp.MustCompile(`^[A-Za-z0-9+/=_-]+$`)

// Connect records the push connection connectionID of the sandbox of session
// id, authenticated by its sandbox token like every channel call (the
// WebSocket's $connect): pushes to the session go to it from now on. An ended
// session, or a sandbox of an earlier launch, is refused.
func (c *Service) Connect(ctx context.Context, id, tok, connID string) error {
	sess, err := session.AuthenticateSandbox(ctx, c.o.Store, id, tok)
	if err != nil {
		return err
	}
	if len(connID) > sandboxwire.MaxConnectionIDLen || !connectionID.MatchString(connID) {
		return apierror.New(apierror.InvalidRequest, "The connection id is not one API Gateway gives.")
	}
	err = c.o.Store.SetPushConnection(ctx, sess.ID, sess.Generation, connID, c.o.Now().Add(session.PushConnectionTTL))
	if errors.Is(err, session.ErrConflict) || errors.Is(err, session.ErrNotFound) {
		return apierror.New(apierror.InvalidToken, "The session has ended, or was launched again.")
	}
	return err
}

// Disconnect forgets the push connection connID (the WebSocket's
// $disconnect), unless its session holds a later one.
func (c *Service) Disconnect(ctx context.Context, connID string) error {
	if len(connID) > sandboxwire.MaxConnectionIDLen || !connectionID.MatchString(connID) {
		return nil // no connection of ours
	}
	return c.o.Store.ClearPushConnection(ctx, connID)
}
