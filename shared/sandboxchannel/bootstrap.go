package sandboxchannel

import (
	"context"
	"errors"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
)

// Bootstrap exchanges the one-time bootstrap code the launch of session id
// gave its sandbox for the sandbox token: a new token, of which only the hash
// is stored, for the generation the code was given to. The code works once and
// until it expires: a second exchange, an expired code, another launch's code
// or the code of a session that is over are 401 invalid_token; a session token
// or app key is 403, as on every sandbox route.
//
// Launchers pass codes, never tokens, because what they pass may be shown (ECS
// shows the RunTask overrides to DescribeTasks and CloudTrail): a code read
// there has been spent by its sandbox at start.
func (c *Service) Bootstrap(ctx context.Context, id, code string) (sandboxwire.BootstrapResponse, error) {
	if code == "" {
		return sandboxwire.BootstrapResponse{}, apierror.New(apierror.MissingToken, "A bootstrap code is required.")
	}
	if token.Check(token.Bootstrap, code) != nil {
		if token.Check(token.Session, code) == nil || token.Check(token.AppKey, code) == nil {
			return sandboxwire.BootstrapResponse{}, apierror.New(apierror.Forbidden, "Only a sandbox's bootstrap code is accepted here.")
		}
		return sandboxwire.BootstrapResponse{}, apierror.New(apierror.InvalidToken, "The bootstrap code is not valid.")
	}
	invalid := apierror.New(apierror.InvalidToken, "The bootstrap code is not valid for this session, or was spent already.")
	if !session.ValidID(id) {
		return sandboxwire.BootstrapResponse{}, invalid
	}
	sess, err := c.o.Store.Get(ctx, id)
	if errors.Is(err, session.ErrNotFound) {
		return sandboxwire.BootstrapResponse{}, invalid
	}
	if err != nil {
		return sandboxwire.BootstrapResponse{}, err
	}
	if !token.Match(token.Bootstrap, code, sess.BootstrapCodeHash) || sess.State.Terminal() {
		return sandboxwire.BootstrapResponse{}, invalid
	}
	if sess.BootstrapExpires.UnixMilli() <= c.o.Now().UnixMilli() {
		return sandboxwire.BootstrapResponse{}, apierror.New(apierror.InvalidToken, "The bootstrap code has expired.")
	}
	plain, hash := token.New(token.Sandbox)
	// One conditional write spends the code: of two exchanges, one wins.
	err = c.o.Store.RedeemBootstrap(ctx, sess.ID, sess.Generation, sess.BootstrapCodeHash, hash)
	if errors.Is(err, session.ErrConflict) || errors.Is(err, session.ErrNotFound) {
		return sandboxwire.BootstrapResponse{}, invalid
	}
	if err != nil {
		return sandboxwire.BootstrapResponse{}, err
	}
	return sandboxwire.BootstrapResponse{SandboxToken: plain, Generation: sess.Generation}, nil
}
