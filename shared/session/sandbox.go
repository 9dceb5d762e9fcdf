package session

import (
	"context"
	"errors"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/token"
)

// AuthenticateSandbox returns the session whose current sandbox holds tok. A
// missing or wrong token is 401, and so is the token of a session that has
// ended or failed: a sandbox has nothing left to do once its session is over
// (the sandbox stops on it). A session token or app key is 403, whatever
// session it belongs to: only sandboxes call sandbox routes.
func AuthenticateSandbox(ctx context.Context, store Reader, id, tok string) (Session, error) {
	if tok == "" {
		return Session{}, apierror.New(apierror.MissingToken, "A sandbox token is required.")
	}
	if token.Check(token.Sandbox, tok) != nil {
		if token.Check(token.Session, tok) == nil || token.Check(token.AppKey, tok) == nil {
			return Session{}, apierror.New(apierror.Forbidden, "Only a sandbox token is accepted here.")
		}
		return Session{}, apierror.New(apierror.InvalidToken, "The sandbox token is not valid.")
	}
	invalid := apierror.New(apierror.InvalidToken, "The sandbox token is not valid for this session.")
	if !sessionID.MatchString(id) {
		return Session{}, invalid
	}
	sess, err := store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && !token.Match(token.Sandbox, tok, sess.SandboxTokenHash)) {
		return Session{}, invalid
	}
	if err == nil && sess.State.Terminal() {
		return Session{}, apierror.New(apierror.InvalidToken, "The session is %s; its sandbox token no longer works.", sess.State)
	}
	return sess, err
}
