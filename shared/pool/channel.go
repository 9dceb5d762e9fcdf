package pool

import (
	"context"
	"errors"
	"regexp"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/token"
)

// The pool sandboxes' side of the channel (sandboxwire's pool routes): their
// launch code for a pool key, their heartbeats, their push connections.

// Bootstrap exchanges the one-time launch code of pool sandbox id for its
// pool key: a new bootstrap code (only its hash is stored), which, once the
// sandbox is claimed, bootstraps its session. The code works once and until
// it expires; any other credential is refused as on every sandbox route.
func (s *Service) Bootstrap(ctx context.Context, id, code string) (sandboxwire.PoolBootstrapResponse, error) {
	if err := checkBootstrapCode(code); err != nil {
		return sandboxwire.PoolBootstrapResponse{}, err
	}
	invalid := apierror.New(apierror.InvalidToken, "The launch code is not valid for this pool sandbox, or was spent already.")
	if !IsID(id) {
		return sandboxwire.PoolBootstrapResponse{}, invalid
	}
	sb, err := s.o.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && (sb.State != Starting || !token.Match(token.Bootstrap, code, sb.LaunchCodeHash))) {
		return sandboxwire.PoolBootstrapResponse{}, invalid
	}
	if err != nil {
		return sandboxwire.PoolBootstrapResponse{}, err
	}
	key, hash := token.New(token.Bootstrap)
	err = s.o.Store.RedeemLaunchCode(ctx, id, sb.LaunchCodeHash, hash, s.o.Now())
	if errors.Is(err, ErrTaken) || errors.Is(err, ErrNotFound) {
		return sandboxwire.PoolBootstrapResponse{}, invalid
	}
	if err != nil {
		return sandboxwire.PoolBootstrapResponse{}, err
	}
	return sandboxwire.PoolBootstrapResponse{PoolKey: key, TmuxSessionName: sb.TmuxSessionName, Workspace: sb.Prepare}, nil
}

func checkBootstrapCode(code string) error {
	if code == "" {
		return apierror.New(apierror.MissingToken, "A pool key or launch code is required.")
	}
	if token.Check(token.Bootstrap, code) != nil {
		if token.Check(token.Session, code) == nil || token.Check(token.AppKey, code) == nil || token.Check(token.Sandbox, code) == nil {
			return apierror.New(apierror.Forbidden, "Only a pool sandbox's key is accepted here.")
		}
		return apierror.New(apierror.InvalidToken, "The pool key is not valid.")
	}
	return nil
}

// authenticate returns the pool sandbox id whose pool key is key. A sandbox
// the pool has forgotten (retired, lost) is 404 not_found: it is to stop.
func (s *Service) authenticate(ctx context.Context, id, key string) (Sandbox, error) {
	if err := checkBootstrapCode(key); err != nil {
		return Sandbox{}, err
	}
	if !IsID(id) {
		return Sandbox{}, apierror.New(apierror.NotFound, "No pool sandbox has that id.")
	}
	sb, err := s.o.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Sandbox{}, apierror.New(apierror.NotFound, "The pool has no sandbox %s (any more): stop.", id)
	}
	if err != nil {
		return Sandbox{}, err
	}
	if !token.Match(token.Bootstrap, key, sb.KeyHash) {
		return Sandbox{}, apierror.New(apierror.InvalidToken, "The pool key is not valid for this pool sandbox.")
	}
	return sb, nil
}

// Authenticate returns the pool sandbox whose pool key is key (errors as
// Heartbeat's): what HeartbeatOf acts for, checked before its body is read.
func (s *Service) Authenticate(ctx context.Context, id, key string) (Sandbox, error) {
	return s.authenticate(ctx, id, key)
}

// Heartbeat records a pool sandbox's sign of life (and that it is idle, if
// it says so), and answers the session that claimed it, if one did.
func (s *Service) Heartbeat(ctx context.Context, id, key string, in sandboxwire.PoolHeartbeat) (sandboxwire.PoolOrders, error) {
	sb, err := s.authenticate(ctx, id, key)
	if err != nil {
		return sandboxwire.PoolOrders{}, err
	}
	return s.HeartbeatOf(ctx, sb, in)
}

// HeartbeatOf is Heartbeat for sb, which Authenticate returned.
func (s *Service) HeartbeatOf(ctx context.Context, sb Sandbox, in sandboxwire.PoolHeartbeat) (sandboxwire.PoolOrders, error) {
	if sb.State != Claimed {
		var err error
		sb, err = s.o.Store.Heartbeat(ctx, sb.ID, in.Idle, s.o.Now())
		if errors.Is(err, ErrNotFound) {
			return sandboxwire.PoolOrders{Stop: true}, nil
		}
		if err != nil {
			return sandboxwire.PoolOrders{}, err
		}
	}
	if sb.State == Claimed {
		return sandboxwire.PoolOrders{SessionID: sb.ClaimedBy}, nil
	}
	return sandboxwire.PoolOrders{}, nil
}

// connectionID is what a push connection id may look like (session's rule).
var connectionID = regexp.MustCompile(`^[A-Za-z0-9+/=_-]+$`)

// Connect records the push connection connID of pool sandbox id,
// authenticated by its pool key (the WebSocket's $connect).
func (s *Service) Connect(ctx context.Context, id, key, connID string) error {
	if _, err := s.authenticate(ctx, id, key); err != nil {
		return err
	}
	if len(connID) > sandboxwire.MaxConnectionIDLen || !connectionID.MatchString(connID) {
		return apierror.New(apierror.InvalidRequest, "The connection id is not one API Gateway gives.")
	}
	err := s.o.Store.SetPushConnection(ctx, id, connID)
	if errors.Is(err, ErrNotFound) {
		return apierror.New(apierror.InvalidToken, "The pool has no sandbox %s (any more).", id)
	}
	return err
}
